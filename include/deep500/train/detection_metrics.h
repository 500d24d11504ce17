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

// One class's AP at one IoU threshold (the building block above), for tests and other tools.
double average_precision(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths,
                         double iou_threshold, int64_t max_detections = 100);

}  // namespace d5
