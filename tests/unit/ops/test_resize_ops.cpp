// Resize on the reference backend: values worked out by hand for each mode and coordinate
// transformation, the gradient against finite differences and as the forward map's transpose, and
// the specs it refuses. (ONNX's 22 node cases of Resize pass in the conformance tests too.)
#include <cmath>

#include "op_test_util.h"

namespace d5::test {
namespace {

Tensor f32(const Shape& s, std::vector<float> v) {
  Tensor t(TensorDesc{DType::f32, s});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}
Tensor i64(std::vector<int64_t> v) {
  Tensor t(TensorDesc{DType::i64, Shape{static_cast<int64_t>(v.size())}});
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}
const Tensor kNoRoi = f32(Shape{0}, {});

// Resize of X with roi, scales, sizes known at creation (opset 13; an empty tensor is "not given").
std::unique_ptr<Operator> resize_op(const Tensor& x, const Tensor& scales, const Tensor& sizes, Attributes attrs,
                                    const Tensor& roi = kNoRoi, int opset = 13) {
  OpSpec s = spec_of("Resize", {x.desc(), roi.desc(), scales.desc(), sizes.desc()}, std::move(attrs),
                     {std::nullopt, roi, scales, sizes});
  s.opset = opset;
  return make_op(s);
}
std::vector<double> resize(const Tensor& x, const Tensor& scales, const Tensor& sizes, Attributes attrs,
                           const Tensor& roi = kNoRoi) {
  auto op = resize_op(x, scales, sizes, std::move(attrs), roi);
  return values(op->run_forward(std::vector<Tensor>{x, roi, scales, sizes})[0]);
}
const Tensor kRow = f32({1, 1, 1, 4}, {1, 2, 3, 4});
const Tensor kNoSizes = Tensor(TensorDesc{DType::i64, Shape{0}});
const Tensor kNoScales = f32(Shape{0}, {});

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// half_pixel maps output x to (x + 0.5)/2 - 0.5 = -0.25, 0.25, 0.75, ...: each value mixes its two
// neighbours 3:1, and the ends read the edge (PyTorch's bilinear with align_corners=False).
TEST(Resize, LinearHalfPixelDoublesARow) {
  expect_near_all(resize(kRow, f32({4}, {1, 1, 1, 2}), kNoSizes, {{"mode", std::string("linear")}}),
                  {1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4});
}

// align_corners keeps both ends: x * 3/6 = 0, 0.5, ..., 3.
TEST(Resize, LinearAlignCornersToSevenHitsBothEnds) {
  expect_near_all(resize(kRow, kNoScales, i64({1, 1, 1, 7}),
                         {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}),
                  {1, 1.5, 2, 2.5, 3, 3.5, 4});
}

TEST(Resize, NearestModesRoundTheMappedCoordinate) {
  // asymmetric, half the size: x_o = 2x, integers.
  expect_near_all(resize(kRow, kNoScales, i64({1, 1, 1, 2}),
                         {{"coordinate_transformation_mode", std::string("asymmetric")}, {"nearest_mode", std::string("floor")}}),
                  {1, 3});
  // half_pixel, twice the size: x_o = -0.25, 0.25, 0.75, 1.25, ...; round_prefer_floor rounds each to
  // its nearest, the ends clamped: 0, 0, 1, 1, 2, 2, 3, 3.
  expect_near_all(resize(kRow, f32({4}, {1, 1, 1, 2}), kNoSizes, {}), {1, 1, 2, 2, 3, 3, 4, 4});
  // asymmetric x1.5: x_o = 0, 0.667, 1.333, 2, 2.667, 3.333: ceil -> 0, 1, 2, 2, 3, 3(clamped 4 -> 3).
  expect_near_all(resize(kRow, f32({4}, {1, 1, 1, 1.5F}), kNoSizes,
                         {{"coordinate_transformation_mode", std::string("asymmetric")}, {"nearest_mode", std::string("ceil")}}),
                  {1, 2, 3, 3, 4, 4});
  // A tie at x_o = 0.5 (asymmetric x2 of 2 elements: 0, 0.5, 1, 1.5): prefer floor or ceil.
  const Tensor two = f32({1, 1, 1, 2}, {10, 20});
  expect_near_all(resize(two, f32({4}, {1, 1, 1, 2}), kNoSizes, {{"coordinate_transformation_mode", std::string("asymmetric")}}),
                  {10, 10, 20, 20});
  expect_near_all(resize(two, f32({4}, {1, 1, 1, 2}), kNoSizes,
                         {{"coordinate_transformation_mode", std::string("asymmetric")},
                          {"nearest_mode", std::string("round_prefer_ceil")}}),
                  {10, 20, 20, 20});
}

// Keys' cubic kernel with a = -0.75 at the distances of r = 0.25 and 0.75: near(t) = 1.25 t^3 -
// 2.25 t^2 + 1, far(t) = -0.75 t^3 + 3.75 t^2 - 6 t + 3, so near(0.25) = 0.87890625, near(0.75) =
// 0.26171875, far(1.25) = -0.10546875, far(1.75) = -0.03515625 (they sum to 1). An impulse at index 2
// of 5, doubled with half_pixel, shows them: output x reads the impulse with the weight of its
// distance from x_o = (x + 0.5)/2 - 0.5.
TEST(Resize, CubicImpulseResponseIsKeysKernel) {
  const Tensor impulse = f32({1, 1, 1, 5}, {0, 0, 1, 0, 0});
  const auto y = resize(impulse, f32({4}, {1, 1, 1, 2}), kNoSizes, {{"mode", std::string("cubic")}});
  ASSERT_EQ(y.size(), 10u);
  expect_near_all({y[1], y[2], y[3], y[4], y[5], y[6], y[7], y[8]},
                  {-0.03515625, -0.10546875, 0.26171875, 0.87890625, 0.87890625, 0.26171875, -0.10546875, -0.03515625});
  // exclude_outside drops taps past the ends and renormalizes: a constant stays constant at the
  // borders either way, but an edge impulse differs.
  const Tensor edge = f32({1, 1, 1, 4}, {1, 0, 0, 0});
  const auto with = resize(edge, f32({4}, {1, 1, 1, 2}), kNoSizes, {{"mode", std::string("cubic")}});
  const auto without = resize(edge, f32({4}, {1, 1, 1, 2}), kNoSizes,
                              {{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}});
  // Output 0: x_o = -0.25, taps -2..1 with far(1.75), near(0.75), near(0.25), far(1.25); with edge
  // padding taps -2, -1, 0 all read element 0.
  EXPECT_NEAR(with[0], -0.03515625 + 0.26171875 + 0.87890625, 1e-6);
  EXPECT_NEAR(without[0], 0.87890625 / (0.87890625 - 0.10546875), 1e-6);
}

// tf_crop_and_resize samples the roi's box with align_corners spacing; outside the input it writes
// extrapolation_value.
TEST(Resize, CropAndResizeExtrapolatesOutsideTheInput) {
  const Tensor roi = f32({8}, {0, 0, 0, 0.5F, 1, 1, 1, 1.5F});  // x from 1.5 to 4.5 of [0, 3]
  const auto y = resize(kRow, kNoScales, i64({1, 1, 1, 4}),
                        {{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                         {"extrapolation_value", 9.0}},
                        roi);
  expect_near_all(y, {2.5, 3.5, 9, 9});
}

// The gradient is the forward map's transpose: <resize(x), g> = <x, dx> for any g, and it matches
// finite differences; extrapolated outputs pass nothing back.
TEST(Resize, GradientIsTheTransposeOfTheForwardMap) {
  const Tensor x = random_tensor(DType::f64, {1, 2, 3, 4}, "resize-x");
  struct Case {
    Attributes attrs;
    Tensor scales, sizes, roi;
  };
  std::vector<Case> cases = {
      {{{"mode", std::string("linear")}}, f32({4}, {1, 1, 1.5F, 2}), kNoSizes, kNoRoi},
      {{{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}}, kNoScales, i64({1, 2, 5, 3}), kNoRoi},
      {{{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("align_corners")}},
       kNoScales, i64({1, 2, 2, 7}), kNoRoi},
      {{{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}},
       kNoScales, i64({1, 2, 4, 4}), f32({8}, {0, 0, -0.25F, 0.1F, 1, 1, 0.8F, 1.4F})},
  };
  for (const auto& c : cases) {
    auto op = resize_op(x, c.scales, c.sizes, c.attrs, c.roi);
    const std::vector<Tensor> in = {x, c.roi, c.scales, c.sizes};
    const Tensor y = op->run_forward(in)[0];
    const Tensor g = random_tensor(DType::f64, y.shape(), "resize-g");
    const Tensor dx = op->run_backward(std::vector<Tensor>{g}, in, {})[0];
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.numel(); ++i) lhs += y.get(i) * g.get(i);
    for (int64_t i = 0; i < x.numel(); ++i) rhs += x.get(i) * dx.get(i);
    EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs)));  // extrapolation_value 0: still linear
    expect_gradient_ok(*op, in);
  }
}

// Opset 18's axes: roi, scales and sizes name only the listed axes; the others keep their extent.
TEST(Resize, AxesOfOpset18DescribeOnlyTheListedAxes) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Attributes linear_asym = {{"mode", std::string("linear")},
                                  {"coordinate_transformation_mode", std::string("asymmetric")}};
  for (int64_t axis : {3, -1}) {
    Attributes a = linear_asym;
    a.set("axes", std::vector<int64_t>{axis});
    auto op = resize_op(x, f32({1}, {2}), kNoSizes, a, kNoRoi, 18);
    const Tensor y = op->run_forward(std::vector<Tensor>{x, kNoRoi, f32({1}, {2}), kNoSizes})[0];
    EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 4}));
    expect_near_all(values(y), {1, 1.5, 2, 2, 3, 3.5, 4, 4});  // x/2 = 0, 0.5, 1, 1.5 (edge-padded)
  }
  // tf_crop_and_resize with a roi of the listed axis only: x_o = x (1 - 0)(2 - 1)/(3 - 1).
  const Tensor roi = f32({2}, {0, 1});
  auto op = resize_op(x, kNoScales, i64({3}), {{"mode", std::string("linear")}, {"axes", std::vector<int64_t>{3}},
                                               {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}},
                      roi, 18);
  expect_near_all(values(op->run_forward(std::vector<Tensor>{x, roi, kNoScales, i64({3})})[0]), {1, 1.5, 2, 3, 3.5, 4});
  expect_gradient_ok(*resize_op(x, f32({2}, {2, 1.5F}), kNoSizes,
                                {{"mode", std::string("cubic")}, {"axes", std::vector<int64_t>{2, 3}}}, kNoRoi, 18),
                     {x, kNoRoi, f32({2}, {2, 1.5F}), kNoSizes});
  EXPECT_THROW(resize_op(x, f32({2}, {2, 2}), kNoSizes, {{"axes", std::vector<int64_t>{3, -1}}}, kNoRoi, 18),
               InvalidArgument);  // the same axis twice
  EXPECT_THROW(resize_op(x, f32({4}, {1, 1, 2, 2}), kNoSizes, {{"axes", std::vector<int64_t>{2, 3}}}, kNoRoi, 18),
               InvalidArgument);  // scales for all axes, axes for two
  try {
    resize_op(x, kNoScales, i64({3}), {{"axes", std::vector<int64_t>{}}}, kNoRoi, 18);
    ADD_FAILURE() << "empty axes were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("axes is empty"), std::string::npos) << e.what();
  }
}

// keep_aspect_ratio_policy: one scale for the listed axes (the smallest or largest of sizes / in),
// extents rounded half up: [2, 3] to sizes [3, 3] is scale 1 (not_larger) or 1.5, [3, 4.5 -> 5].
TEST(Resize, KeepAspectRatioPolicyOfOpset18) {
  const Tensor x = f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor sizes = i64({3, 3});
  auto shape_with = [&](const char* policy) {
    auto op = resize_op(x, kNoScales, sizes,
                        {{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", std::string(policy)}}, kNoRoi,
                        18);
    return op->run_forward(std::vector<Tensor>{x, kNoRoi, kNoScales, sizes})[0];
  };
  EXPECT_EQ(shape_with("stretch").shape(), (Shape{1, 1, 3, 3}));
  const Tensor same = shape_with("not_larger");
  EXPECT_EQ(same.shape(), (Shape{1, 1, 2, 3}));
  expect_near_all(values(same), {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(shape_with("not_smaller").shape(), (Shape{1, 1, 3, 5}));
  EXPECT_THROW(shape_with("fit"), InvalidArgument);
}

// half_pixel_symmetric (opset 19): 4 -> scale 0.6 is L = 2.4 cut to 2; half_pixel maps x to 1/3 and
// 2, the symmetric form shifts both by in/2 (1 - 2/2.4) = 1/3.
TEST(Resize, HalfPixelSymmetricCentresTheRoundedOutput) {
  const Tensor scales = f32({4}, {1, 1, 1, 0.6F});
  auto with = [&](const char* transform) {
    auto op = resize_op(kRow, scales, kNoSizes,
                        {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string(transform)}},
                        kNoRoi, 19);
    return values(op->run_forward(std::vector<Tensor>{kRow, kNoRoi, scales, kNoSizes})[0]);
  };
  expect_near_all(with("half_pixel"), {1 + 1.0 / 3, 3}, 1e-6);
  expect_near_all(with("half_pixel_symmetric"), {1 + 2.0 / 3, 3 + 1.0 / 3}, 1e-6);
}

// antialias (opset 18): halving 0..7 with the linear kernel stretched to 4 taps, weights
// 1/8, 3/8, 3/8, 1/8 around x_o = 2x + 0.5 (the first and last read the edge); upsampling is as
// without it.
TEST(Resize, AntialiasStretchesTheKernelWhenDownsampling) {
  const Tensor x = f32({1, 1, 1, 8}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor half = f32({4}, {1, 1, 1, 0.5F});
  auto run_with = [&](const Tensor& in, const Tensor& scales, Attributes a) {
    auto op = resize_op(in, scales, kNoSizes, std::move(a), kNoRoi, 18);
    return values(op->run_forward(std::vector<Tensor>{in, kNoRoi, scales, kNoSizes})[0]);
  };
  expect_near_all(run_with(x, half, {{"mode", std::string("linear")}, {"antialias", int64_t{1}}}),
                  {0.625, 2.5, 4.5, 6.375});
  expect_near_all(run_with(x, half, {{"mode", std::string("linear")}}), {0.5, 2.5, 4.5, 6.5});
  expect_near_all(run_with(kRow, f32({4}, {1, 1, 1, 2}), {{"mode", std::string("linear")}, {"antialias", int64_t{1}}}),
                  {1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4});
  // Cubic: the weights still sum to one, so a constant row stays constant.
  expect_near_all(run_with(f32({1, 1, 1, 8}, {3, 3, 3, 3, 3, 3, 3, 3}), half,
                           {{"mode", std::string("cubic")}, {"antialias", int64_t{1}}}),
                  {3, 3, 3, 3});
  expect_gradient_ok(*resize_op(x, half, kNoSizes, {{"mode", std::string("cubic")}, {"antialias", int64_t{1}}}, kNoRoi, 18),
                     {x, kNoRoi, half, kNoSizes});
}

TEST(Resize, RefusesWhatItDoesNotImplement) {
  const Tensor scales = f32({4}, {1, 1, 1, 2});
  EXPECT_THROW(resize_op(kRow, scales, kNoSizes, {}, kNoRoi, 10), InvalidArgument);
  EXPECT_THROW(resize_op(kRow, scales, i64({1, 1, 1, 8}), {}), InvalidArgument);   // both
  EXPECT_THROW(resize_op(kRow, kNoScales, kNoSizes, {}), InvalidArgument);          // neither
  EXPECT_THROW(resize_op(kRow, scales, kNoSizes, {{"mode", std::string("area")}}), InvalidArgument);
  EXPECT_THROW(resize_op(kRow, scales, kNoSizes, {{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}),
               InvalidArgument);
  EXPECT_THROW(resize_op(kRow, f32({4}, {1, 1, 1, 0.1F}), kNoSizes, {}), InvalidArgument);  // empties the axis
  EXPECT_THROW(resize_op(kRow, f32({3}, {1, 1, 2}), kNoSizes, {}), InvalidArgument);
}

}  // namespace
}  // namespace d5::test
