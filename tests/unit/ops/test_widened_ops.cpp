// f16 and bf16 Gemm, MatMul and Conv in the reference (ops/widened.h): the f32 result on the
// widened inputs, rounded once. The sums below tell that apart from accumulating in the narrow
// type: 2048 + 1 + 1 is 2050 in f32 (and in f16), but adding the ones one at a time in f16 rounds
// each 2049 back to 2048; bf16 does the same at 256.
#include "elementwise_test_util.h"

namespace d5::test {

namespace {

Tensor narrow(std::initializer_list<double> v, Shape s, DType t) {
  Tensor x = Tensor::uninitialized(TensorDesc{t, std::move(s)});
  int64_t i = 0;
  for (double e : v) x.set(i++, e);
  return x;
}

}  // namespace

TEST(WidenedOps, GemmSumsInF32AndRoundsOnce) {
  for (auto [t, big] : {std::pair{DType::f16, 2048.0}, {DType::bf16, 256.0}}) {
    const Tensor a = narrow({1, 1, 1}, Shape{1, 3}, t);
    const Tensor b = narrow({big, 1, 1}, Shape{3, 1}, t);
    const Tensor y = run_op("Gemm", {a, b});
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(values(y), (V{big + 2})) << to_string(t);
    // Odd: f32 gives big + 3, which the narrow type cannot hold; it rounds to even (big + 4).
    const Tensor b3 = narrow({big, 1, 2}, Shape{3, 1}, t);
    EXPECT_EQ(values(run_op("Gemm", {a, b3})), (V{big + 4})) << to_string(t);
  }
}

TEST(WidenedOps, MatMulAndConvToo) {
  const Tensor a = narrow({1, 1, 1}, Shape{1, 3}, DType::f16);
  const Tensor b = narrow({2048, 1, 1}, Shape{3, 1}, DType::f16);
  const Tensor mm = run_op("MatMul", {a, b});
  EXPECT_EQ(mm.dtype(), DType::f16);
  EXPECT_EQ(values(mm), (V{2050}));
  // A 1x1 convolution over three channels is the same sum per pixel.
  const Tensor x = narrow({2048, 1, 1}, Shape{1, 3, 1, 1}, DType::f16);
  const Tensor w = narrow({1, 1, 1}, Shape{1, 3, 1, 1}, DType::f16);
  Attributes at;
  at.set("kernel_shape", std::vector<int64_t>{1, 1});
  const Tensor y = run_op("Conv", {x, w}, at);
  EXPECT_EQ(y.dtype(), DType::f16);
  EXPECT_EQ(values(y), (V{2050}));
}

TEST(WidenedOps, GemmGradientIsTheF32GradientRounded) {
  // Y = A B with A [1, 3], B [3, 1]: dA = dY B^T, dB = A^T dY.
  const Tensor a = narrow({1, 2, 3}, Shape{1, 3}, DType::f16);
  const Tensor b = narrow({2048, 1, 0.5}, Shape{3, 1}, DType::f16);
  auto op = make_op(spec_for("Gemm", {a, b}));
  EXPECT_NE(op->implementation().find("widened"), std::string::npos) << op->implementation();
  const std::vector<Tensor> in = {a, b};
  const auto out = op->run_forward(in);
  EXPECT_EQ(values(out[0]), (V{2052}));  // 2048 + 2 + 1.5 = 2051.5 in f32, 2052 in f16
  const std::vector<Tensor> gy = {narrow({0.5}, Shape{1, 1}, DType::f16)};
  const auto g = op->run_backward(gy, in, out);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].dtype(), DType::f16);
  EXPECT_EQ(values(g[0]), (V{1024, 0.5, 0.25}));
  EXPECT_EQ(values(g[1]), (V{0.5, 1, 1.5}));
}

TEST(WidenedOps, MixedPrecisionIsRefused) {
  const Tensor a = narrow({1, 1}, Shape{1, 2}, DType::f16);
  const Tensor b = Tensor::from_values<float>(Shape{2, 1}, {1, 1});
  expect_invalid_spec(spec_for("Gemm", {a, b}), "mix f16");
}

}  // namespace d5::test
