// COCO-style average precision and greedy NMS on cases small enough to work out by hand; NMS is also
// compared with torchvision.ops.nms on random boxes where torchvision is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/train/detection_metrics.h"

namespace d5 {
namespace {

TEST(BoxIou, OverlapOverUnion) {
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 2, 2}, {1, 1, 3, 3}), 1.0 / 7.0);  // 1 / (4 + 4 - 1)
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 2, 2}, {0, 0, 2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 1, 1}, {1, 0, 2, 1}), 0.0);  // touching edges
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 0, 5}, {0, 0, 0, 5}), 0.0);  // no area
}

// One ground truth and one detection on it: every threshold matches, AP = 1.
TEST(CocoMap, APerfectDetectionScoresOne) {
  const MapResult r = coco_map({{0, 1, 0.9, {0, 0, 10, 10}}}, {{0, 1, {0, 0, 10, 10}}});
  EXPECT_DOUBLE_EQ(r.map, 1.0);
  EXPECT_DOUBLE_EQ(r.map50, 1.0);
  EXPECT_EQ(r.labels, (std::vector<int64_t>{1}));
}

// A false positive ranked above the true one: ranks give recall 0, 1 and precision 0, 1/2; the
// envelope is 1/2 everywhere, so all 101 recall points read 1/2.
TEST(CocoMap, AFalsePositiveFirstHalvesThePrecision) {
  const std::vector<GroundTruth> gt = {{0, 0, {0, 0, 10, 10}}};
  const std::vector<Detection> det = {{0, 0, 0.9, {20, 20, 30, 30}}, {0, 0, 0.8, {0, 0, 10, 10}}};
  EXPECT_DOUBLE_EQ(average_precision(det, gt, 0.5), 0.5);
  // Ranked the other way round the precision is 1 up to recall 1: AP 1.
  const std::vector<Detection> swapped = {{0, 0, 0.7, {20, 20, 30, 30}}, {0, 0, 0.8, {0, 0, 10, 10}}};
  EXPECT_DOUBLE_EQ(average_precision(swapped, gt, 0.5), 1.0);
}

// Two ground truths, one found: recall reaches 0.5 at precision 1, so the points 0 ... 0.5 (51 of
// 101) read 1 and the rest 0.
TEST(CocoMap, HalfTheRecallIsFiftyOneOfTheHundredAndOnePoints) {
  const std::vector<GroundTruth> gt = {{0, 0, {0, 0, 10, 10}}, {1, 0, {0, 0, 10, 10}}};
  EXPECT_DOUBLE_EQ(average_precision({{0, 0, 0.9, {0, 0, 10, 10}}}, gt, 0.5), 51.0 / 101.0);
}

// A second detection of the same object is a false positive; across images the ranking is global.
TEST(CocoMap, DuplicatesAreFalsePositivesAndRankingIsGlobal) {
  const std::vector<GroundTruth> gt = {{0, 0, {0, 0, 10, 10}}, {1, 0, {0, 0, 10, 10}}};
  const std::vector<Detection> det = {{0, 0, 0.9, {0, 0, 10, 10}},   // TP (image 0)
                                      {0, 0, 0.8, {0, 0, 10, 9}},    // duplicate: FP
                                      {1, 0, 0.7, {0, 0, 10, 10}}};  // TP (image 1)
  // Ranks: TP, FP, TP -> recall .5, .5, 1; precision 1, 1/2, 2/3 -> envelope 1, 2/3, 2/3.
  // Points 0 .. 0.5 read 1 (51), 0.51 .. 1 read 2/3 (50).
  EXPECT_NEAR(average_precision(det, gt, 0.5), (51.0 + 50.0 * 2.0 / 3.0) / 101.0, 1e-12);
}

// A detection overlapping its object with IoU 0.64 counts at thresholds 0.5, 0.55, 0.6 only: mAP@.5
// is 1, mAP@.75 0, mAP@[.5:.95] 3/10. A class with ground truth and no detection scores 0 and
// halves the means; a class with detections and no ground truth is left out.
TEST(CocoMap, ThresholdsAndClassesAverage) {
  const Box gt_box = {0, 0, 10, 10}, det_box = {0, 0, 10, 6.4};  // IoU 64 / 100
  MapResult r = coco_map({{0, 3, 0.9, det_box}, {0, 7, 0.5, {50, 50, 60, 60}}}, {{0, 3, gt_box}});
  EXPECT_DOUBLE_EQ(r.map50, 1.0);
  EXPECT_DOUBLE_EQ(r.map75, 0.0);
  EXPECT_NEAR(r.map, 0.3, 1e-12);
  EXPECT_EQ(r.labels, (std::vector<int64_t>{3}));
  r = coco_map({{0, 3, 0.9, det_box}}, {{0, 3, gt_box}, {0, 4, gt_box}});
  EXPECT_DOUBLE_EQ(r.map50, 0.5);
  EXPECT_NEAR(r.map, 0.15, 1e-12);
  EXPECT_TRUE(std::isnan(coco_map({{0, 3, 0.9, det_box}}, {}).map));
}

// Each image keeps its best max_detections: a true positive ranked past the cap is dropped.
TEST(CocoMap, MaxDetectionsPerImageCapsTheRanking) {
  const std::vector<GroundTruth> gt = {{0, 0, {0, 0, 10, 10}}};
  const std::vector<Detection> det = {{0, 0, 0.9, {20, 20, 30, 30}}, {0, 0, 0.8, {0, 0, 10, 10}}};
  EXPECT_DOUBLE_EQ(average_precision(det, gt, 0.5, 1), 0.0);
  EXPECT_THROW(average_precision(det, gt, 0.5, 0), InvalidArgument);
}

TEST(NonMaxSuppression, KeepsTheBestOfEachOverlappingGroup) {
  const std::vector<Box> boxes = {{0, 0, 10, 10}, {1, 1, 11, 11}, {20, 20, 30, 30}, {0, 0, 10, 10.5}};
  const std::vector<double> scores = {0.8, 0.9, 0.7, 0.95};
  // 3 first; 1 overlaps it with IoU 81/(105+100-81) = 0.653 > 0.5: dropped; 0 overlaps 3 with
  // 100/105: dropped; 2 overlaps nothing.
  EXPECT_EQ(non_max_suppression(boxes, scores, 0.5), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(non_max_suppression(boxes, scores, 0.99), (std::vector<int64_t>{3, 1, 0, 2}));
  EXPECT_THROW(non_max_suppression(boxes, {0.1}, 0.5), InvalidArgument);
}

// torchvision.ops.nms as the oracle: 200 random boxes, three thresholds.
TEST(NonMaxSuppression, AgreesWithTorchvision) {
  const std::string python = D5_PYTHON_FOR_TESTS;
  if (std::system((python + " -c 'import torch, torchvision' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "torchvision.ops.nms is the oracle: " << python << " cannot import torchvision (Debian: "
                 << "python3-torchvision)";
  RngStream rng(7, "nms-oracle");
  std::vector<Box> boxes;
  std::vector<double> scores;
  std::ostringstream text;
  text.precision(17);
  for (int i = 0; i < 200; ++i) {
    const double x = rng.uniform(0, 80), y = rng.uniform(0, 80), w = rng.uniform(2, 25), h = rng.uniform(2, 25);
    boxes.push_back({x, y, x + w, y + h});
    scores.push_back(rng.uniform());
    text << x << " " << y << " " << x + w << " " << y + h << " " << scores.back() << "\n";
  }
  for (double t : {0.3, 0.5, 0.7}) {
    const std::string script =
        "import sys, torch, torchvision\n"
        "rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]\n"
        "t = torch.tensor(rows, dtype=torch.float64)\n"
        "print(' '.join(str(int(i)) for i in torchvision.ops.nms(t[:, :4], t[:, 4], " + std::to_string(t) + ")))\n";
    const std::string cmd = python + " -c \"" + script + "\" <<'EOF'\n" + text.str() + "EOF\n";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ASSERT_EQ(pclose(p), 0) << out;
    std::vector<int64_t> want;
    std::istringstream in(out);
    for (int64_t i; in >> i;) want.push_back(i);
    EXPECT_EQ(non_max_suppression(boxes, scores, t), want) << "threshold " << t;
    EXPECT_GT(want.size(), 10u);
  }
}

}  // namespace
}  // namespace d5
