// Custom operators as LibTorch autograd functions: the median pooling example compiled at test
// time, applied to at::Tensors, differentiated by torch::autograd, inside a loss made of ATen
// operations, and as the torch backend's registry entry.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstring>
#include <filesystem>

#include "../../../src/backends/torch/custom_autograd.h"
#include "../custom/custom_op_test_cache.h"
#include "deep500/backends/builtin.h"
#include "deep500/op/custom_op_compiler.h"
#include "deep500/op/native_op.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/validation.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;
using torch_backend::apply_custom_op;

const fs::path& test_cache() { return test::custom_op_test_cache(); }

const std::map<std::string, std::string> kMedian3{{"KERNEL_SIZE", "3"}, {"STRIDE", "1"}};
fs::path example() { return fs::path(D5_SOURCE_DIR) / "examples" / "median_pooling" / "median_pool.cpp"; }

CustomOpOptions options(bool register_op) {
  CustomOpOptions o;
  o.cache_dir = test_cache();
  o.register_op = register_op;
  return o;
}

const CustomOpBuild& median3() {
  static const CustomOpBuild b = build_custom_op("MedianPool", {example()}, kMedian3, options(false));
  return b;
}

std::shared_ptr<Operator> median_op(const Shape& x) {
  OpSpec s;
  s.type = "MedianPool";
  s.inputs = {TensorDesc{DType::f64, x}};
  const Shape y{x[0], x[1], x[2] - 2, x[3] - 2};
  return median3().library->create(s, {TensorDesc{DType::f64, y}});
}

// Distinct values (a permutation of a grid 0.01 apart, centred): every window has a unique median,
// and no perturbation below 0.005 changes which element it is.
at::Tensor distinct_values(const std::vector<int64_t>& shape, int64_t seed) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  return (at::randperm(n, gen, opts) * 0.01 - 0.005 * static_cast<double>(n)).reshape(shape);
}

Tensor to_d5(const at::Tensor& t) {
  const at::Tensor c = t.detach().contiguous();
  Tensor d(DType::f64, Shape(c.sizes().vec()));
  std::memcpy(d.data(), c.data_ptr(), d.bytes());
  return d;
}

at::Tensor to_aten(const Tensor& t) {
  return at::from_blob(const_cast<void*>(t.data()), t.shape().dims(), at::TensorOptions().dtype(at::kDouble))
      .clone();
}

// The largest |a - b|.
double max_diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a - b).abs().max().item<double>();
}

TEST(TorchCustomOp, AutogradMatchesTheOperatorsOwnForwardAndBackward) {
  const auto op = median_op(Shape{2, 3, 7, 8});
  const at::Tensor x = distinct_values({2, 3, 7, 8}, 1).requires_grad_(true);
  const at::Tensor gy = distinct_values({2, 3, 5, 6}, 2);

  // The reference path: the library's entry points through the deep500 Operator.
  const Tensor x5 = to_d5(x), gy5 = to_d5(gy);
  const auto y5 = op->run_forward(std::span(&x5, 1));
  const auto gx5 = op->run_backward(std::span(&gy5, 1), std::span(&x5, 1), y5);

  const auto y = apply_custom_op(op, {x});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_TRUE(y[0].requires_grad());
  ASSERT_NE(y[0].grad_fn(), nullptr);
  const auto gx = torch::autograd::grad({y[0]}, {x}, {gy});
  // Both run the same code on the same values in the same order: bit-identical.
  EXPECT_EQ(max_diff(y[0].detach(), to_aten(y5[0])), 0.0);
  EXPECT_EQ(max_diff(gx[0], to_aten(gx5[0])), 0.0);

  // Without grad mode (or without inputs that need one) no graph is recorded.
  {
    at::NoGradGuard no_grad;
    EXPECT_FALSE(apply_custom_op(op, {x})[0].requires_grad());
  }
  EXPECT_FALSE(apply_custom_op(op, {x.detach()})[0].requires_grad());
  // Inputs of any strides: a transposed view is made contiguous for the operator.
  const at::Tensor xt = x.detach().transpose(2, 3).contiguous().transpose(2, 3);
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_EQ(max_diff(apply_custom_op(op, {xt})[0], y[0].detach()), 0.0);
}

TEST(TorchCustomOp, LossOfAtenOpsBackpropagatesThroughIt) {
  // loss = sum(median(2x + 1)^2) + mean(x): the gradient flows through ATen ops on both sides of
  // the custom op. Checked against central differences: the median is piecewise linear and the
  // loss quadratic in it, so away from reorderings (perturbations of 1e-6 against spacings of
  // 0.02 after scaling) the difference quotient is exact but for rounding: |loss| ~ 25 with f64
  // rounding ~1e-16 relative over a step of 1e-6 gives ~1e-8; 1e-6 leaves room.
  const auto op = median_op(Shape{1, 2, 5, 6});
  const at::Tensor x = distinct_values({1, 2, 5, 6}, 3).requires_grad_(true);
  auto loss_of = [&](const at::Tensor& v) {
    const auto m = apply_custom_op(op, {v * 2 + 1})[0];
    return (m * m).sum() + v.mean();
  };
  const at::Tensor loss = loss_of(x);
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  const at::Tensor g = x.grad();
  // The median routes each output's gradient to one input: most inputs of a 5x6 plane feed some
  // window, and the mean adds 1/60 everywhere.
  EXPECT_GT((g.abs() > 1.0 / 60 + 1e-12).sum().item<int64_t>(), 0);

  at::NoGradGuard no_grad;
  const double eps = 1e-6;
  at::Tensor flat = x.detach().clone().view(-1);
  double worst = 0;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double v = flat[i].item<double>();
    flat[i] = v + eps;
    const double up = loss_of(flat.view(x.sizes())).item<double>();
    flat[i] = v - eps;
    const double down = loss_of(flat.view(x.sizes())).item<double>();
    flat[i] = v;
    worst = std::max(worst, std::abs((up - down) / (2 * eps) - g.view(-1)[i].item<double>()));
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(TorchCustomOp, RegisteredOnTorchItIsAnAutogradOperator) {
  register_builtin_operators();
  const TensorDesc in{DType::f64, Shape{2, 2, 6, 7}}, out{DType::f64, Shape{2, 2, 4, 5}};
  auto compiled = compile_custom_op("MedianPool", {example()}, {in}, {out}, kMedian3, options(true));
  OpSpec s;
  s.type = "MedianPool";
  s.inputs = {in};
  auto op = OpRegistry::global().create(s, "torch");
  EXPECT_EQ(op->implementation(), "torch:autograd(custom:libMedianPool.so)");
  EXPECT_EQ(OpRegistry::global().create(s, "reference")->implementation(), "custom:libMedianPool.so");
  EXPECT_TRUE(op->has_gradient());

  const Tensor x = to_d5(distinct_values({2, 2, 6, 7}, 4));
  const Tensor gy = to_d5(distinct_values({2, 2, 4, 5}, 5));
  const auto y = op->run_forward(std::span(&x, 1));
  const auto y_ref = compiled->run_forward(std::span(&x, 1));
  EXPECT_TRUE(allclose(y[0], y_ref[0], 0, 0));
  const auto gx = op->run_backward(std::span(&gy, 1), std::span(&x, 1), y);
  const auto gx_ref = compiled->run_backward(std::span(&gy, 1), std::span(&x, 1), y_ref);
  EXPECT_TRUE(allclose(gx[0], gx_ref[0], 0, 0));
  // An undefined upstream gradient is zero.
  const auto g0 = op->run_backward(std::vector<Tensor>{Tensor()}, std::span(&x, 1), y);
  for (int64_t i = 0; i < g0[0].numel(); ++i) EXPECT_EQ(g0[0].get(i), 0.0);
  const auto r = test_gradient(*op, std::span(&x, 1));
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;

  // The Level-1 executor reaches the wrapped operator through inner().
  auto* wrapped = dynamic_cast<torch_backend::AutogradOp*>(op.get());
  ASSERT_NE(wrapped, nullptr);
  const at::Tensor xa = to_aten(x).requires_grad_(true);
  EXPECT_TRUE(apply_custom_op(wrapped->inner(), {xa})[0].requires_grad());
}

// A stateful operator (backward uses what the last forward chose) applied twice before backward:
// each graph node gets the gradient of its own forward.
TEST(TorchCustomOp, EachNodeDifferentiatesItsOwnForward) {
  struct State {
    int64_t argmax = -1;
  };
  auto state = std::make_shared<State>();
  OpSpec s;
  s.type = "ArgMaxPick";
  s.inputs = {TensorDesc{DType::f64, Shape{4}}};
  std::shared_ptr<Operator> op = custom_op_from_native(
      s, {TensorDesc{DType::f64, Shape{1}}},
      [state](std::span<const Tensor> in, std::span<Tensor> out) {
        const auto x = in[0].span<double>();
        state->argmax = std::max_element(x.begin(), x.end()) - x.begin();
        out[0].set(0, x[static_cast<size_t>(state->argmax)]);
      },
      [state](std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
              std::span<Tensor> gx) {
        gx[0].fill(0);
        gx[0].set(state->argmax, gy[0].get(0));
      });
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor a = at::tensor({1.0, 9.0, 2.0, 3.0}, opts).requires_grad_(true);
  const at::Tensor b = at::tensor({7.0, 0.0, 2.0, 3.0}, opts).requires_grad_(true);
  const auto ya = apply_custom_op(op, {a})[0];
  const auto yb = apply_custom_op(op, {b})[0];  // the operator's state now belongs to b
  const auto ga = torch::autograd::grad({ya}, {a})[0];
  EXPECT_EQ(ga[1].item<double>(), 1.0);
  EXPECT_EQ(ga.sum().item<double>(), 1.0);
  const auto gb = torch::autograd::grad({yb}, {b})[0];
  EXPECT_EQ(gb[0].item<double>(), 1.0);
  EXPECT_EQ(gb.sum().item<double>(), 1.0);
}

TEST(TorchCustomOp, WrongInputsAreInvalidArgumentsAlsoFromBackward) {
  const auto op = median_op(Shape{1, 1, 4, 4});
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  EXPECT_THROW(apply_custom_op(op, {at::zeros({1, 1, 4, 4}, opts)}), InvalidArgument);  // f32, not f64
  EXPECT_THROW(apply_custom_op(op, {}), InvalidArgument);
  EXPECT_THROW(apply_custom_op(nullptr, {}), InvalidArgument);

  // An operator whose backward fails: the error comes out of torch::autograd::grad as it was.
  OpSpec s;
  s.type = "NoBackward";
  s.inputs = {TensorDesc{DType::f64, Shape{2}}};
  std::shared_ptr<Operator> failing = custom_op_from_native(
      s, {TensorDesc{DType::f64, Shape{2}}},
      [](std::span<const Tensor> in, std::span<Tensor> out) { out[0].copy_from(in[0]); },
      [](std::span<const Tensor>, std::span<const Tensor>, std::span<const Tensor>, std::span<Tensor>) {
        D5_THROW(Unimplemented, "this backward is missing on purpose");
      });
  const at::Tensor x = at::ones({2}, at::TensorOptions().dtype(at::kDouble)).requires_grad_(true);
  const auto y = apply_custom_op(failing, {x})[0];
  EXPECT_THROW(torch::autograd::grad({y.sum()}, {x}), Unimplemented);
}

}  // namespace
}  // namespace d5
