// NonMaxSuppression on the reference backend: selections worked out by hand (IoU exactly at the
// threshold, ties, the score threshold, flipped corners, the center format, one image's boxes
// never suppressing another's), the padded static bound of selected_indices, and the specs it
// refuses. (ONNX's nine node cases pass in the conformance tests too.)
#include <array>

#include "deep500/op/op_traits.h"
#include "op_test_util.h"

namespace d5::test {
namespace {

using Row = std::array<int64_t, 3>;  // (batch, class, box)

Tensor f32(const Shape& s, std::vector<float> v) {
  Tensor t(TensorDesc{DType::f32, s});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}
Tensor one_i64(int64_t v) { return Tensor::from_values<int64_t>(Shape{1}, {v}); }
Tensor one_f32(float v) { return Tensor::from_values<float>(Shape{1}, {v}); }

// Inputs given as undefined tensors are absent; the others are known at creation unless
// `known` is false.
std::unique_ptr<Operator> nms_op(const std::vector<Tensor>& in, Attributes attrs = {}, bool known = true) {
  std::vector<TensorDesc> descs;
  std::vector<std::optional<Tensor>> values;
  std::vector<bool> present;
  for (const Tensor& t : in) {
    descs.push_back(t.defined() ? t.desc() : TensorDesc{});
    values.push_back(t.defined() && known ? std::optional<Tensor>(t) : std::nullopt);
    present.push_back(t.defined());
  }
  OpSpec s = spec_of("NonMaxSuppression", descs, std::move(attrs), values);
  s.present = present;
  s.opset = 11;
  return make_op(s);
}

// selected_indices as rows, the padding rows included.
std::vector<Row> nms(const std::vector<Tensor>& in, Attributes attrs = {}) {
  const Tensor out = nms_op(in, std::move(attrs))->run_forward(in)[0];
  EXPECT_EQ(out.dtype(), DType::i64);
  EXPECT_EQ(out.shape().rank(), 2u);
  EXPECT_EQ(out.shape()[1], 3);
  std::vector<Row> rows(static_cast<size_t>(out.shape()[0]));
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t j = 0; j < 3; ++j) rows[r][j] = out.data_as<int64_t>()[r * 3 + j];
  return rows;
}

constexpr int64_t P = kPaddingValue;

// One image of five boxes [y1, x1, y2, x2]; every y range is [0, 2] but box 3's:
//   0: x [0, 2], area 4
//   1: x [1, 3]: IoU with 0 = 2 / (4 + 4 - 2) = 1/3
//   2: box 0 with its corners given the other way round: IoU with 0 = 1
//   3: [10, 11] x [10, 11], far from every other box
//   4: x [0, 1], area 2: IoU with 0 (and 2) = 2 / (4 + 2 - 2) = 0.5 exactly, with 1 = 0
const Tensor kBoxes = f32({1, 5, 4}, {0, 0, 2, 2, 0, 1, 2, 3, 2, 2, 0, 0, 10, 10, 11, 11, 0, 0, 2, 1});
// The same boxes as [x_center, y_center, width, height].
const Tensor kCenterBoxes = f32({1, 5, 4}, {1, 1, 2, 2, 2, 1, 2, 2, 1, 1, 2, 2, 10.5f, 10.5f, 1, 1, 0.5f, 1, 1, 2});
// Class 0 ranks 2, 0, 1, 4, 3; class 1 ties boxes 0, 1 and 3 at 0.6, box 4 scores 0.2.
const Tensor kScores = f32({1, 2, 5}, {0.9f, 0.8f, 0.95f, 0.3f, 0.7f, 0.6f, 0.6f, 0.1f, 0.6f, 0.2f});

// iou_threshold 0.5, at most 3 a class. Class 0: 2 is kept; 0 overlaps it with IoU 1 > 0.5 and
// goes; 1 (IoU 1/3 with 2) stays; 4 overlaps 2 with IoU exactly 0.5, which is not > 0.5, and 1
// not at all, so it stays; that is 3, and 3 is never reached. Class 1: the tied boxes in input
// order, 0, then 1 (IoU 1/3 with 0), then 3: 3 again.
TEST(NonMaxSuppression, SelectsByScoreAndSuppressesAboveTheThreshold) {
  const std::vector<Row> want = {{0, 0, 2}, {0, 0, 1}, {0, 0, 4}, {0, 1, 0}, {0, 1, 1}, {0, 1, 3}};
  EXPECT_EQ(nms({kBoxes, kScores, one_i64(3), one_f32(0.5f)}), want);
  EXPECT_EQ(nms({kCenterBoxes, kScores, one_i64(3), one_f32(0.5f)}, {{"center_point_box", int64_t{1}}}), want);
}

// At most 4 a class: the bound is 1 * 2 * 4 = 8 rows. Class 0 goes on to box 3, which overlaps
// nothing. score_threshold 0.2 keeps scores > 0.2: class 1 loses box 2 (0.1) and box 4 (0.2
// itself) and selects 0, 1, 3 as before; the eighth row is padding.
TEST(NonMaxSuppression, PadsTheRowsPastTheSelectedOnes) {
  const std::vector<Row> want = {{0, 0, 2}, {0, 0, 1}, {0, 0, 4}, {0, 0, 3},
                                 {0, 1, 0}, {0, 1, 1}, {0, 1, 3}, {P, P, P}};
  EXPECT_EQ(nms({kBoxes, kScores, one_i64(4), one_f32(0.5f), one_f32(0.2f)}), want);
  // A bound past the box count is the box count: 1 * 2 * 5 rows, 3 of them padding.
  const auto rows = nms({kBoxes, kScores, one_i64(int64_t{1} << 62), one_f32(0.5f), one_f32(0.2f)});
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[6], (Row{0, 1, 3}));
  EXPECT_EQ(rows[7], (Row{P, P, P}));
  EXPECT_EQ(rows[9], (Row{P, P, P}));
}

// iou_threshold absent is 0: any overlap suppresses, so of class 0 only 2 and the distant 3
// remain (1 and 4 overlap box 2). max_output_boxes_per_class absent or 0 selects nothing.
TEST(NonMaxSuppression, AbsentInputsTakeTheirDefaults) {
  const auto rows = nms({kBoxes, kScores, one_i64(5), Tensor(), one_f32(0.25f)});
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[0], (Row{0, 0, 2}));
  EXPECT_EQ(rows[1], (Row{0, 0, 3}));
  EXPECT_EQ(rows[2], (Row{0, 1, 0}));  // class 1: 0, then 3 (1 overlaps 0)
  EXPECT_EQ(rows[3], (Row{0, 1, 3}));
  EXPECT_EQ(rows[4], (Row{P, P, P}));
  EXPECT_TRUE(nms({kBoxes, kScores}).empty());
  EXPECT_TRUE(nms({kBoxes, kScores, one_i64(0), one_f32(0.5f)}).empty());
}

// Image 1 has box 2 moved far away, so there it no longer suppresses box 0: each image's boxes
// are tested only against that image's selections. One class, scores of class 0 above.
TEST(NonMaxSuppression, EachImageSelectsOnItsOwn) {
  std::vector<float> b(kBoxes.data_as<float>(), kBoxes.data_as<float>() + 20);
  const std::vector<float> moved = {20, 20, 21, 21};
  std::vector<float> two = b;
  two.insert(two.end(), b.begin(), b.end());
  std::copy(moved.begin(), moved.end(), two.begin() + 20 + 8);
  const std::vector<float> s = {0.9f, 0.8f, 0.95f, 0.3f, 0.7f};
  std::vector<float> ss = s;
  ss.insert(ss.end(), s.begin(), s.end());
  // Image 1: 2, then 0 (nothing selected overlaps it), then 1 (IoU 1/3 with 0).
  const std::vector<Row> want = {{0, 0, 2}, {0, 0, 1}, {0, 0, 4}, {1, 0, 2}, {1, 0, 0}, {1, 0, 1}};
  EXPECT_EQ(nms({f32({2, 5, 4}, two), f32({2, 1, 5}, ss), one_i64(3), one_f32(0.5f)}), want);
}

TEST(NonMaxSuppression, HasNoGradient) {
  const auto op = nms_op({kBoxes, kScores, one_i64(3)});
  EXPECT_FALSE(op->has_gradient());
  EXPECT_TRUE(op->differentiable_inputs().empty());
  EXPECT_NE(op->no_gradient_reason().find("indices"), std::string::npos);
}

TEST(NonMaxSuppression, RefusesBadSpecs) {
  const Tensor k3 = one_i64(3);
  // Shapes: boxes [N, S, 4], scores [N, C, S] of the same dtype.
  EXPECT_THROW(nms_op({f32({5, 4}, std::vector<float>(20)), kScores, k3}), InvalidArgument);
  EXPECT_THROW(nms_op({f32({1, 5, 3}, std::vector<float>(15)), kScores, k3}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, f32({1, 2, 4}, std::vector<float>(8)), k3}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, f32({2, 2, 5}, std::vector<float>(20)), k3}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, kScores.cast(DType::f64), k3}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes}), InvalidArgument);
  // max_output_boxes_per_class: one value, not negative, known when the operator is created.
  EXPECT_THROW(nms_op({kBoxes, kScores, one_i64(-1)}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, kScores, Tensor::from_values<int64_t>(Shape{2}, {1, 2})}), InvalidArgument);
  try {
    nms_op({kBoxes, kScores, k3}, {}, /*known=*/false);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("known when the operator is created"), std::string::npos) << e.what();
  }
  // Thresholds: one value each, iou_threshold in [0, 1]; center_point_box 0 or 1.
  EXPECT_THROW(nms_op({kBoxes, kScores, k3, one_f32(1.5f)}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, kScores, k3, one_f32(-0.1f)}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, kScores, k3, f32({2}, {0.5f, 0.5f})}), InvalidArgument);
  EXPECT_THROW(nms_op({kBoxes, kScores, k3}, {{"center_point_box", int64_t{2}}}), InvalidArgument);
}

// Values that arrive only at run time are checked then: an iou_threshold outside [0, 1], and a
// max_output_boxes_per_class other than the one the bound was made for.
TEST(NonMaxSuppression, RefusesRunTimeValuesOutsideTheSpec) {
  OpSpec s = spec_of("NonMaxSuppression", {kBoxes.desc(), kScores.desc(), one_i64(3).desc(), one_f32(0).desc()}, {},
                     {std::nullopt, std::nullopt, one_i64(3), std::nullopt});
  auto op = make_op(s);
  EXPECT_EQ(op->output_descs()[0].shape, (Shape{6, 3}));
  EXPECT_NO_THROW(op->run_forward(std::vector<Tensor>{kBoxes, kScores, one_i64(3), one_f32(0.5f)}));
  EXPECT_THROW(op->run_forward(std::vector<Tensor>{kBoxes, kScores, one_i64(3), one_f32(2)}), InvalidArgument);
  EXPECT_THROW(op->run_forward(std::vector<Tensor>{kBoxes, kScores, one_i64(2), one_f32(0.5f)}), InvalidArgument);
}

}  // namespace
}  // namespace d5::test
