#pragma once
// Level 2: object detection's quality measures and box post-processing (docs/detection-metrics.md).
//
// - box_iou: intersection over union of two boxes (x1, y1, x2, y2), continuous coordinates (no
//   "+1" pixel convention), 0 for boxes without area.
// - non_max_suppression: greedy, as torchvision.ops.nms: boxes by descending score (ties keep their
//   input order), each kept unless its IoU with an already kept box exceeds the threshold.
// - coco_map: COCO's average precision, as pycocotools computes it. Per class and IoU threshold t,
//   each image's detections (best score first, at most max_detections per image) are matched
//   greedily to the unmatched ground-truth box of highest IoU >= t; unmatched detections are false
//   positives. Over all images, detections sorted by score give precision and recall at each rank;
//   precision is made non-increasing from the right (the envelope) and read at the 101 recall
//   points 0, 0.01, ..., 1 (the first rank whose recall reaches the point; 0 past the last);
//   AP is their mean. Classes without ground truth are left out of the means. mAP@.5 is the mean
//   AP over classes at t = 0.5; mAP@[.5:.95] also averages over t = 0.5, 0.55, ..., 0.95.
#include <array>
#include <cstdint>
#include <vector>

#include "deep500/core/tensor.h"

namespace d5 {

using Box = std::array<double, 4>;  // x1, y1, x2, y2

double box_iou(const Box& a, const Box& b);

// Indices of the kept boxes, best score first. InvalidArgument when the counts differ.
std::vector<int64_t> non_max_suppression(const std::vector<Box>& boxes, const std::vector<double>& scores,
                                         double iou_threshold);

struct Detection {
  int64_t image = 0;
  int64_t label = 0;
  double score = 0;
  Box box{};
};

struct GroundTruth {
  int64_t image = 0;
  int64_t label = 0;
  Box box{};
};

struct MapResult {
  double map = 0;    // mAP@[.5:.95]
  double map50 = 0;  // mAP@.5
  double map75 = 0;  // mAP@.75
  std::vector<int64_t> labels;            // the classes with ground truth, ascending
  std::vector<std::vector<double>> ap;    // [label][threshold]: AP at t = 0.5 + 0.05 i
};

// InvalidArgument for max_detections < 1 or a non-finite score. With no ground truth at all every
// mean is NaN (nothing to measure).
MapResult coco_map(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths,
                   int64_t max_detections = 100);

// A single-shot detector's post-processing (torchvision's SSD defaults): each anchor's class
// scores through a softmax and its offsets decoded from the anchor (box_coding.h); per object
// class, the anchors scoring above score_threshold, at most candidates_per_class of them (best
// first), reduced by non_max_suppression at nms_iou; then the max_detections best of the image.
struct SsdDecoding {
  double score_threshold = 0.01;
  double nms_iou = 0.45;
  int64_t candidates_per_class = 400;
  int64_t max_detections = 100;
};

// The detections in the first `rows` images of prediction [N, A, 4 + K] (f32: offsets, then class
// scores with the background first) with anchors [A, 4] f32; image i is numbered first_image + i,
// object class c - 1 is score column c (the datasets' labels). InvalidArgument for other layouts.
std::vector<Detection> decode_ssd(const Tensor& prediction, const Tensor& anchors, int64_t rows, int64_t first_image,
                                  const SsdDecoding& options = {});

// One class's AP at one IoU threshold (the building block above), for tests and other tools.
double average_precision(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths,
                         double iou_threshold, int64_t max_detections = 100);

}  // namespace d5
