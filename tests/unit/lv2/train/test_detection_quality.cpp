// A single-shot detector's post-processing (decode_ssd) and the map measures on a case worked out
// by hand: softmax scores, box decoding, the score threshold, per-class NMS, the cap per image, and
// COCO's means over classes and thresholds.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/core/error.h"
#include "deep500/train/detection_metrics.h"
#include "deep500/train/quality.h"

namespace d5 {
namespace {

Tensor f32(const Shape& s, const std::vector<float>& v) {
  Tensor t(DType::f32, s);
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}

// Anchors 0 and 1 overlap (IoU 90 / 110 = 0.82), anchor 2 stands apart. Classes: background,
// object 0, object 1 (scores in log space, so the softmax is a plain ratio):
//   anchor 0: (1, 9, 1) / 11 -> object 0: 9/11,  object 1: 1/11
//   anchor 1: (1, 4, 1) / 6  -> object 0: 4/6,   object 1: 1/6
//   anchor 2: (1, 1, 18) / 20 -> object 0: 1/20, object 1: 18/20
// Offsets 0 (each box is its anchor) except anchor 2's dh = 5 log 1.5: height 15, centre kept:
// (20, 17.5, 30, 32.5). Object 0: anchor 0 kept, anchor 1 suppressed (IoU 0.82 > 0.45), anchor 2
// kept. Object 1: anchor 2, then anchor 1; anchor 0 suppressed by anchor 1.
const Tensor kAnchors = f32({3, 4}, {0, 0, 10, 10, 1, 0, 11, 10, 20, 20, 30, 30});

Tensor prediction() {
  const float l9 = std::log(9.0f), l4 = std::log(4.0f), l18 = std::log(18.0f), dh = 5 * std::log(1.5f);
  return f32({1, 3, 7}, {0, 0, 0, 0, 0, l9, 0,  //
                         0, 0, 0, 0, 0, l4, 0,  //
                         0, 0, 0, dh, 0, 0, l18});
}

TEST(DecodeSsd, SoftmaxDecodingAndPerClassNms) {
  const std::vector<Detection> d = decode_ssd(prediction(), kAnchors, 1, 7);
  ASSERT_EQ(d.size(), 4u);
  // Best score first over both classes.
  const std::vector<std::pair<int64_t, double>> want = {{1, 0.9}, {0, 9.0 / 11}, {1, 1.0 / 6}, {0, 0.05}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(d[i].image, 7) << i;
    EXPECT_EQ(d[i].label, want[i].first) << i;
    EXPECT_NEAR(d[i].score, want[i].second, 1e-6) << i;
  }
  const Box tall{20, 17.5, 30, 32.5}, first{0, 0, 10, 10}, second{1, 0, 11, 10};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(d[0].box[k], tall[k], 1e-4) << k;
    EXPECT_NEAR(d[1].box[k], first[k], 1e-6) << k;
    EXPECT_NEAR(d[2].box[k], second[k], 1e-6) << k;
  }
  // The cap keeps the best; a threshold above 1/20 drops anchor 2's object-0 score.
  EXPECT_EQ(decode_ssd(prediction(), kAnchors, 1, 0, {0.01, 0.45, 400, 3}).size(), 3u);
  EXPECT_EQ(decode_ssd(prediction(), kAnchors, 1, 0, {0.06, 0.45, 400, 100}).size(), 3u);
  // No NMS to speak of (threshold 1): anchor 0 and 1 both report each class.
  EXPECT_EQ(decode_ssd(prediction(), kAnchors, 1, 0, {0.01, 1.0, 400, 100}).size(), 6u);
  EXPECT_THROW(decode_ssd(prediction(), f32({2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}), 1, 0), InvalidArgument);
}

// Ground truth: object 0 at (0, 0, 10, 10), object 1 at (20, 20, 30, 35) and a padding row. Object
// 0: its detection (9/11) has IoU 1, the other (1/20, at anchor 2) is a false positive ranked
// below it: AP 1 at every threshold. Object 1: the best detection (0.9, the tall box) overlaps
// it by 12.5 x 10 / (150 + 150 - 125) = 0.714: a hit at thresholds 0.5 ... 0.7 (5 of 10), where
// the other (1/6, at anchor 1) ranks below it: AP 1 there, 0 above. map50 = 1, map75 = 1/2,
// map = (10 + 5) / 20 = 0.75.
TEST(DetectionMeasures, MapOverClassesAndThresholds) {
  QualitySettings s;
  s.anchors = kAnchors;
  const std::map<std::string, Tensor> batch = {
      {"labels", Tensor::from_values<int64_t>({1, 3}, {0, 1, -100})},
      {"boxes", f32({1, 3, 4}, {0, 0, 10, 10, 20, 20, 30, 35, 0, 0, 0, 0})}};
  for (const auto& [name, want] : std::vector<std::pair<std::string, double>>{{"map50", 1.0}, {"map75", 0.5},
                                                                              {"map", 0.75}}) {
    auto m = make_quality_measure(name, s);
    EXPECT_TRUE(std::isnan(m->value()));
    m->observe_batch(prediction(), batch, 1);
    EXPECT_NEAR(m->value(), want, 1e-12) << name;
    EXPECT_TRUE(m->higher_is_better());
    EXPECT_EQ(m->unit(), "fraction");
    // A padded batch row (rows = 0) adds nothing; reset forgets everything.
    m->observe_batch(prediction(), batch, 0);
    EXPECT_NEAR(m->value(), want, 1e-12) << name;
    m->reset();
    EXPECT_TRUE(std::isnan(m->value()));
  }
}

TEST(DetectionMeasures, RefuseWhatTheyCannotRead) {
  QualitySettings s;
  s.anchors = kAnchors;
  auto m = make_quality_measure("map", s);
  const Tensor labels = Tensor::from_values<int64_t>({1, 1}, {0});
  EXPECT_THROW(m->observe(prediction(), labels, 1), InvalidArgument);  // no boxes
  EXPECT_THROW(m->observe_batch(prediction(), {{"labels", labels}}, 1), InvalidArgument);
  auto no_anchors = make_quality_measure("map50");
  EXPECT_THROW(no_anchors->observe_batch(prediction(), {{"labels", labels}, {"boxes", f32({1, 1, 4}, {0, 0, 1, 1})}}, 1),
               InvalidArgument);
}

}  // namespace
}  // namespace d5
