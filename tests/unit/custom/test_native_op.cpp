#include <gtest/gtest.h>

#include <stdexcept>

#include "deep500/op/native_op.h"
#include "deep500/op/validation.h"

namespace d5 {
namespace {

OpSpec square_spec(DType t = DType::f64) {
  OpSpec s;
  s.type = "Square";
  s.inputs = {TensorDesc{t, Shape{2, 3}}};
  return s;
}

NativeForward square_forward() {
  return [](std::span<const Tensor> in, std::span<Tensor> out) {
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, in[0].get(i) * in[0].get(i));
  };
}

// d(x^2)/dx = 2x; `factor` 1 gives a wrong gradient the checker must catch.
NativeBackward square_backward(double factor = 2) {
  return [factor](std::span<const Tensor> g, std::span<const Tensor> in, std::span<const Tensor>,
                  std::span<Tensor> gin) {
    for (int64_t i = 0; i < in[0].numel(); ++i) gin[0].set(i, factor * in[0].get(i) * g[0].get(i));
  };
}

Tensor input() { return Tensor::from_values<double>({2, 3}, {0.5, -1.25, 2.0, 0.75, -0.3, 1.1}); }

TEST(NativeOp, ForwardAndGradientCheck) {
  auto op = custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward(),
                                  square_backward(),
                                  {.implementation = "native:square", .differentiable = {}, .flops = 6});
  EXPECT_EQ(op->implementation(), "native:square");
  EXPECT_EQ(op->flops(), 6);
  EXPECT_EQ(op->differentiable_inputs(), std::vector<bool>{true});
  const Tensor x = input();
  const auto y = op->run_forward(std::span(&x, 1));
  EXPECT_DOUBLE_EQ(y[0].get(1), 1.5625);  // (-1.25)^2
  EXPECT_DOUBLE_EQ(y[0].get(4), 0.09);    // (-0.3)^2
  const auto r = test_gradient(*op, std::vector<Tensor>{x});
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_EQ(r.checked, 6);
}

TEST(NativeOp, WrongBackwardIsCaught) {
  auto op = custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward(),
                                  square_backward(1));
  const auto r = test_gradient(*op, std::vector<Tensor>{input()});
  EXPECT_EQ(r.state, CaseState::Failed) << r.detail;
}

TEST(NativeOp, UndefinedUpstreamGradientArrivesAsZeros) {
  bool saw_zeros = false;
  auto op = custom_op_from_native(
      square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward(),
      [&](std::span<const Tensor> g, std::span<const Tensor>, std::span<const Tensor>, std::span<Tensor> gin) {
        saw_zeros = g[0].defined() && g[0].get(0) == 0 && g[0].get(5) == 0;
        gin[0].fill(0);
      });
  const Tensor x = input();
  const auto y = op->run_forward(std::span(&x, 1));
  const std::vector<Tensor> no_upstream(1);
  op->run_backward(no_upstream, std::span(&x, 1), y);
  EXPECT_TRUE(saw_zeros);
}

TEST(NativeOp, WithoutBackwardHasNoGradient) {
  auto op = custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward());
  EXPECT_FALSE(op->has_gradient());
  const auto r = test_gradient(*op, std::vector<Tensor>{input()});
  EXPECT_EQ(r.state, CaseState::Skipped);
  EXPECT_NE(r.detail.find("no backward function"), std::string::npos) << r.detail;
}

TEST(NativeOp, ExceptionsBecomeD5ErrorsNamingTheOp) {
  auto op = custom_op_from_native(
      square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}},
      [](std::span<const Tensor>, std::span<Tensor>) { throw std::runtime_error("kernel exploded"); });
  const Tensor x = input();
  try {
    op->run_forward(std::span(&x, 1));
    FAIL() << "forward should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("Square (native): forward failed: kernel exploded"), std::string::npos)
        << e.what();
  }
}

TEST(NativeOp, RejectsWrongInputsAndBadMasks) {
  auto op = custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward());
  const Tensor wrong(DType::f32, Shape{2, 3});
  EXPECT_THROW(op->run_forward(std::span(&wrong, 1)), InvalidArgument);
  EXPECT_THROW(custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward(),
                                     square_backward(),
                                     {.implementation = "native", .differentiable = {true, false}, .flops = 0}),
               InvalidArgument);
  EXPECT_THROW(custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, square_forward(), {},
                                     {.implementation = "native", .differentiable = {true}, .flops = 0}),
               InvalidArgument);
  EXPECT_THROW(custom_op_from_native(square_spec(), {TensorDesc{DType::f64, Shape{2, 3}}}, {}),
               InvalidArgument);
}

}  // namespace
}  // namespace d5
