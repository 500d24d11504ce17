// RoiAlign on the reference backend: bilinear sampling of a linear ramp is exact, so every pooled
// value can be worked out by hand; both coordinate modes, spatial_scale, batch indices, samples
// outside the image, mode max's corner rule, gradients against finite differences, refusals.
// (ONNX's two RoiAlign node cases pass in the conformance tests too.)
#include "op_test_util.h"

namespace d5::test {
namespace {

Tensor f64(const Shape& s, std::vector<double> v) {
  Tensor t(TensorDesc{DType::f64, s});
  std::copy(v.begin(), v.end(), t.data_as<double>());
  return t;
}
Tensor i64(std::vector<int64_t> v) {
  Tensor t(TensorDesc{DType::i64, Shape{static_cast<int64_t>(v.size())}});
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

// v(y, x) = 4y + x on a 4 x 4 image; a second image adds 100.
Tensor ramp(int64_t images = 1) {
  std::vector<double> v;
  for (int64_t n = 0; n < images; ++n)
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 4; ++x) v.push_back(static_cast<double>(100 * n + 4 * y + x));
  return f64({images, 1, 4, 4}, v);
}

std::unique_ptr<Operator> roi_op(const Tensor& x, const Tensor& rois, const Tensor& idx, Attributes attrs,
                                 int opset = 16) {
  OpSpec s = spec_of("RoiAlign", {x.desc(), rois.desc(), idx.desc()}, std::move(attrs));
  s.opset = opset;
  return make_op(s);
}
std::vector<double> roi_align(const Tensor& x, const Tensor& rois, const Tensor& idx, Attributes attrs,
                              int opset = 16) {
  return values(roi_op(x, rois, idx, std::move(attrs), opset)->run_forward(std::vector<Tensor>{x, rois, idx})[0]);
}

// half_pixel shifts the box (0, 0, 4, 4) to (-0.5, -0.5, 3.5, 3.5); 2 x 2 bins of 2 x 2 samples
// land on the integer points, and each bin averages the ramp at its four: 2.5, 4.5, 10.5, 12.5.
TEST(RoiAlign, AveragesBilinearSamplesOfEachBin) {
  const Attributes a = {{"output_height", int64_t{2}}, {"output_width", int64_t{2}}, {"sampling_ratio", int64_t{2}}};
  EXPECT_EQ(roi_align(ramp(), f64({1, 4}, {0, 0, 4, 4}), i64({0}), a), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  // A ramp's bilinear samples average to the ramp at the bins' centre: the box (0.5, 0.5, 2.5,
  // 2.5) -> (0, 0, 2, 2) pools to v(1, 1) = 5 with any grid; spatial_scale 0.5 on doubled boxes
  // is the same box.
  const Attributes one = {{"sampling_ratio", int64_t{3}}};
  EXPECT_DOUBLE_EQ(roi_align(ramp(), f64({1, 4}, {0.5, 0.5, 2.5, 2.5}), i64({0}), one)[0], 5);
  const Attributes scaled = {{"sampling_ratio", int64_t{3}}, {"spatial_scale", 0.5}};
  EXPECT_DOUBLE_EQ(roi_align(ramp(), f64({1, 4}, {1, 1, 5, 5}), i64({0}), scaled)[0], 5);
  // sampling_ratio 0: ceil(2 / 1) = 2 samples a side, the same average.
  EXPECT_DOUBLE_EQ(roi_align(ramp(), f64({1, 4}, {0.5, 0.5, 2.5, 2.5}), i64({0}), {})[0], 5);
}

// output_half_pixel (opset 10's rule) does not shift: the box (0, 0, 3, 3) pools to v(1.5, 1.5).
TEST(RoiAlign, OutputHalfPixelLeavesTheBoxWhereItIs) {
  const Attributes a = {{"coordinate_transformation_mode", std::string("output_half_pixel")}};
  EXPECT_DOUBLE_EQ(roi_align(ramp(), f64({1, 4}, {0, 0, 3, 3}), i64({0}), a)[0], 7.5);
  EXPECT_DOUBLE_EQ(roi_align(ramp(), f64({1, 4}, {0, 0, 3, 3}), i64({0}), {}, 10)[0], 7.5);  // opset 10
}

TEST(RoiAlign, ReadsTheImageEachBoxNamesAndZeroOutside) {
  const auto y = roi_align(ramp(2), f64({3, 4}, {0.5, 0.5, 2.5, 2.5, 0.5, 0.5, 2.5, 2.5, 10, 10, 12, 12}),
                           i64({1, 0, 1}), {{"sampling_ratio", int64_t{1}}});
  EXPECT_EQ(y, (std::vector<double>{105, 5, 0}));  // the third box lies past [-1, 4]: samples are 0
}

// Mode max keeps the largest weighted corner over the bin's samples, not the largest sample. One
// bin over the whole box samples (0.5, 0.5) ... (2.5, 2.5), each between four pixels weighted 1/4:
// the largest weighted corner is 15/4 (the largest sample would be v(2.5, 2.5) = 12.5). With 2 x 2
// bins the samples sit on pixels, weighting one by 1 and three by 0, so bin (1, 1) pools 15 and an
// all-negative image pools to 0 (the zero-weighted corners win), not to its values.
TEST(RoiAlign, MaxTakesTheLargestWeightedCorner) {
  const Tensor box = f64({1, 4}, {0, 0, 4, 4});
  EXPECT_DOUBLE_EQ(roi_align(ramp(), box, i64({0}), {{"mode", std::string("max")}, {"sampling_ratio", int64_t{2}}})[0],
                   3.75);
  const Attributes bins = {{"mode", std::string("max")}, {"sampling_ratio", int64_t{2}},
                           {"output_height", int64_t{2}}, {"output_width", int64_t{2}}};
  EXPECT_DOUBLE_EQ(roi_align(ramp(), box, i64({0}), bins)[3], 15);
  const Tensor negative = f64({1, 1, 4, 4}, std::vector<double>(16, -1.0));
  EXPECT_EQ(roi_align(negative, box, i64({0}), bins), (std::vector<double>{0, 0, 0, 0}));
}

TEST(RoiAlign, GradientsMatchFiniteDifferences) {
  const Tensor x = random_tensor(DType::f64, {2, 3, 5, 6}, "roi-x");
  const Tensor rois = f64({3, 4}, {0.3, 0.7, 4.1, 3.3, 1.2, 0.4, 5.5, 4.6, 2.0, 2.5, 3.1, 3.9});
  const Tensor idx = i64({1, 0, 1});
  for (const char* mode : {"avg", "max"}) {
    auto op = roi_op(x, rois, idx,
                     {{"mode", std::string(mode)}, {"output_height", int64_t{2}}, {"output_width", int64_t{3}}});
    expect_gradient_ok(*op, {x, rois, idx});
  }
}

TEST(RoiAlign, RefusesBadSpecsAndBatchIndices) {
  const Tensor x = ramp();
  EXPECT_THROW(roi_op(x, f64({1, 3}, {0, 0, 1}), i64({0}), {}), InvalidArgument);
  EXPECT_THROW(roi_op(x, f64({1, 4}, {0, 0, 1, 1}), i64({0, 0}), {}), InvalidArgument);
  EXPECT_THROW(roi_op(x, f64({1, 4}, {0, 0, 1, 1}), i64({0}), {{"mode", std::string("sum")}}), InvalidArgument);
  EXPECT_THROW(roi_op(x, f64({1, 4}, {0, 0, 1, 1}), i64({0}), {{"output_height", int64_t{0}}}), InvalidArgument);
  auto op = roi_op(x, f64({1, 4}, {0, 0, 1, 1}), i64({1}), {});
  EXPECT_THROW(op->run_forward(std::vector<Tensor>{x, f64({1, 4}, {0, 0, 1, 1}), i64({1})}), InvalidArgument);
}

}  // namespace
}  // namespace d5::test
