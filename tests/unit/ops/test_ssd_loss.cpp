// SsdLoss (deep500) on the reference backend: hand-derived losses and gradients of matching
// (threshold, forced matches, padding rows), hard-negative selection, the box coding's targets,
// finite differences, and the specs and data it refuses.
#include <cmath>

#include "norm_test_util.h"

namespace d5::test {

namespace {

Tensor i64(const Shape& s, std::initializer_list<int64_t> v) { return Tensor::from_values<int64_t>(s, v); }

std::unique_ptr<Operator> ssd(const std::vector<Tensor>& in, Attributes a = {}) {
  return make_op(spec_of("SsdLoss", descs(in), std::move(a)));
}

Tensor gradient(Operator& op, const std::vector<Tensor>& in) {
  const auto out = op.run_forward(in);
  return op.run_backward(std::vector<Tensor>{f64({}, {1})}, in, out)[0];
}

// Three 10 x 10 anchors apart from each other; classes: background, 0 and 1 (K = 3, D = 7).
const Tensor kAnchors = f64({3, 4}, {0, 0, 10, 10, 20, 0, 30, 10, 0, 20, 10, 30});

double smooth_l1(double x) { return std::abs(x) < 1 ? x * x / 2 : std::abs(x) - 0.5; }

}  // namespace

// Image 0 holds object class 1 exactly on anchor 0 (IoU 1: positive, class target 2, offsets
// target 0) and a padding row whose box is never read; anchors 1 and 2 overlap nothing, so they
// are the negatives and, at 3 per positive, both counted. Image 1 holds only padding: no
// positive, no hard negative, no loss, no gradient. P = 1.
//   anchor 0: offsets (0.5, -2, 0, 0) -> smooth-L1 1/8 + 3/2; scores (0, 0, 0) -> ce log 3;
//   anchor 1: scores (1, 0, 0), target 0 -> ce log(e + 2) - 1; anchor 2: scores 0 -> log 3.
// Gradients: offsets (0.5, -1, 0, 0); scores softmax - one-hot of the target.
TEST(SsdLoss, HandDerivedLossAndGradient) {
  // clang-format off
  const Tensor p = f64({2, 3, 7}, {0.5, -2, 0, 0,   0, 0, 0,
                                   9,   9,  9, 9,   1, 0, 0,
                                   9,   9,  9, 9,   0, 0, 0,
                                   5,   5,  5, 5,   3, 2, 1,
                                   5,   5,  5, 5,   3, 2, 1,
                                   5,   5,  5, 5,   3, 2, 1});
  // clang-format on
  const Tensor boxes = f64({2, 2, 4}, {0, 0, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7});
  const std::vector<Tensor> in = {p, kAnchors, boxes, i64({2, 2}, {1, -100, -100, -100})};
  const double e = std::exp(1.0);
  const double loss = 0.125 + 1.5 + std::log(3.0) + (std::log(e + 2) - 1) + std::log(3.0);
  auto op = ssd(in);
  expect_values(op->run_forward(in)[0], {loss});
  EXPECT_EQ(op->differentiable_inputs(), (std::vector<bool>{true, false, false, false}));
  const double t = 1.0 / 3, s1 = e / (e + 2), s0 = 1 / (e + 2);
  std::vector<double> want(42, 0.0);
  const std::vector<double> rows[3] = {{0.5, -1, 0, 0, t, t, t - 1}, {0, 0, 0, 0, s1 - 1, s0, s0},
                                       {0, 0, 0, 0, t - 1, t, t}};
  for (size_t a = 0; a < 3; ++a)
    for (size_t k = 0; k < 7; ++k) want[a * 7 + k] = rows[a][k];
  expect_values(gradient(*op, in), want);
}

// Matching. Object (0, 0, 10, 4) overlaps anchor 0 with IoU 40 / 100 = 0.4, under match_iou, and
// nothing else: anchor 0 is its best, so it is claimed anyway (forced). Its target offsets: centre
// (5, 2) against (5, 5), height 4 against 10: (0, 10 (2 - 5) / 10, 0, 5 log 0.4) = (0, -3, 0,
// 5 log 0.4). Object (20, 0, 30, 6) overlaps anchor 1 with 0.6: matched by the threshold, target
// (0, -2, 0, 5 log 0.6). Zero offsets predicted; all scores 0 (ce log 3 each). Two positives,
// one negative (anchor 2), counted: loss = (smooth-L1 of 3, 5 log 0.4, 2, 5 log 0.6 + 3 log 3) / 2.
TEST(SsdLoss, ThresholdAndForcedMatchesGiveTheEncodedTargets) {
  Tensor p(DType::f64, Shape{1, 3, 7});
  p.fill(0);
  const Tensor boxes = f64({1, 2, 4}, {0, 0, 10, 4, 20, 0, 30, 6});
  const std::vector<Tensor> in = {p, kAnchors, boxes, i64({1, 2}, {0, 1})};
  const double box = smooth_l1(3) + smooth_l1(5 * std::log(0.4)) + smooth_l1(2) + smooth_l1(5 * std::log(0.6));
  expect_values(ssd(in)->run_forward(in)[0], {(box + 3 * std::log(3.0)) / 2});
  // Raising match_iou above 0.6 leaves anchor 1 to its forced match: the same loss.
  expect_values(ssd(in, {{"match_iou", 0.9}})->run_forward(in)[0], {(box + 3 * std::log(3.0)) / 2});
  // The gradient on anchor 0's offsets: clamp(0 - target, -1, 1) / 2 = (0, 1, 0, 1) / 2.
  const auto g = values(gradient(*ssd(in), in));
  EXPECT_NEAR(g[0], 0, 1e-15);
  EXPECT_NEAR(g[1], 0.5, 1e-15);
  EXPECT_NEAR(g[3], 0.5, 1e-15);
  // Anchor 1's dy target is -2: clamp(2) / 2.
  EXPECT_NEAR(g[7 + 1], 0.5, 1e-15);
}

// Hard negatives: with negative_ratio 1 and one positive, only the negative of highest
// background cross-entropy counts. Anchor 1 scores (0, 2, 0), ce log(2 + e^2), above anchor 2's
// (0, 0, 0), ce log 3: anchor 1 counts, anchor 2 gets no gradient. With ratio 0 neither counts.
TEST(SsdLoss, CountsOnlyTheHardestNegatives) {
  // clang-format off
  Tensor p = f64({1, 3, 7}, {0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 0, 2, 0,
                             0, 0, 0, 0, 0, 0, 0});
  // clang-format on
  const std::vector<Tensor> in = {p, kAnchors, f64({1, 1, 4}, {0, 0, 10, 10}), i64({1, 1}, {0})};
  const double e2 = std::exp(2.0);
  expect_values(ssd(in, {{"negative_ratio", int64_t{1}}})->run_forward(in)[0],
                {std::log(3.0) + std::log(2 + e2)});
  expect_values(ssd(in, {{"negative_ratio", int64_t{0}}})->run_forward(in)[0], {std::log(3.0)});
  const auto g = values(gradient(*ssd(in, {{"negative_ratio", int64_t{1}}}), in));
  EXPECT_NEAR(g[7 + 4], 1 / (2 + e2) - 1, 1e-12);  // anchor 1, background
  for (size_t k = 14; k < 21; ++k) EXPECT_EQ(g[k], 0.0) << "anchor 2 is not counted, element " << k;
}

// Finite differences (test_gradient: central differences in f64) on random scores and offsets of
// four images over the three anchors, objects on and between anchors, padding rows, int32 labels.
// The random scores keep every pair of negative cross-entropies apart by far more than the
// probe's step, so the hard negatives stay the same under it.
TEST(SsdLoss, GradientMatchesFiniteDifferences) {
  const Tensor p = random_tensor(DType::f64, {4, 3, 7}, "ssd_fd", -2, 2);
  const Tensor boxes = f64({4, 2, 4}, {0, 0, 9, 11, 21, 1, 29, 9, 2, 18, 11, 29, 0, 0, 0, 0, 0, 0, 10, 10, 20, 2,
                                       31, 10, 0, 0, 0, 0, 0, 0, 0, 0});
  const Tensor labels = Tensor::from_values<int32_t>({4, 2}, {0, 1, 1, -100, 0, 0, -100, -100});
  const std::vector<Tensor> in = {p, kAnchors, boxes, labels};
  expect_gradient_ok(*ssd(in), in);
  expect_gradient_ok(*ssd(in, {{"negative_ratio", int64_t{1}}}), in);
}

TEST(SsdLoss, RefusesBadSpecs) {
  const auto f = DType::f32, l = DType::i64;
  const auto spec = [](std::vector<TensorDesc> d, Attributes a = {}) {
    return spec_of("SsdLoss", std::move(d), std::move(a));
  };
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {f, {2, 5, 4}}}), "4 inputs");
  expect_invalid(spec({{f, {2, 21}}, {f, {3, 4}}, {f, {2, 5, 4}}, {l, {2, 5}}}), "[N, A, 4 + K]");
  expect_invalid(spec({{f, {2, 3, 5}}, {f, {3, 4}}, {f, {2, 5, 4}}, {l, {2, 5}}}), "K >= 2");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {4, 4}}, {f, {2, 5, 4}}, {l, {2, 5}}}), "anchors");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {DType::f64, {2, 5, 4}}, {l, {2, 5}}}), "boxes");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {f, {2, 5, 4}}, {l, {2, 4}}}), "labels");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {f, {2, 5, 4}}, {f, {2, 5}}}), "labels");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {f, {2, 5, 4}}, {l, {2, 5}}}, {{"negative_ratio", int64_t{-1}}}),
                 "negative_ratio");
  expect_invalid(spec({{f, {2, 3, 7}}, {f, {3, 4}}, {f, {2, 5, 4}}, {l, {2, 5}}}, {{"match_iou", 0.0}}),
                 "match_iou");
}

// Labels and boxes are data: checked when the op runs, naming the image and row.
TEST(SsdLoss, RefusesBadLabelsAndBoxes) {
  Tensor p(DType::f64, Shape{1, 3, 7});
  p.fill(0);
  const auto run = [&](const Tensor& anchors, const Tensor& boxes, const Tensor& labels) {
    const std::vector<Tensor> in = {p, anchors, boxes, labels};
    ssd(in)->run_forward(in);
  };
  const Tensor ok_boxes = f64({1, 1, 4}, {0, 0, 10, 10});
  expect_throw_naming<InvalidArgument>([&] { run(kAnchors, ok_boxes, i64({1, 1}, {2})); }, "SsdLoss",
                                       "labels[0, 0] = 2");
  expect_throw_naming<InvalidArgument>([&] { run(kAnchors, ok_boxes, i64({1, 1}, {-1})); }, "SsdLoss",
                                       "labels[0, 0] = -1");
  expect_throw_naming<InvalidArgument>([&] { run(kAnchors, f64({1, 1, 4}, {5, 0, 5, 10}), i64({1, 1}, {0})); },
                                       "SsdLoss", "boxes[0, 0]");
  const Tensor flat = f64({3, 4}, {0, 0, 10, 10, 20, 0, 20, 10, 0, 20, 10, 30});
  expect_throw_naming<InvalidArgument>([&] { run(flat, ok_boxes, i64({1, 1}, {0})); }, "SsdLoss", "anchor 1");
}

}  // namespace d5::test
