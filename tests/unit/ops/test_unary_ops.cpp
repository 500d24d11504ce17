#include <cmath>

#include "op_test_util.h"

namespace d5::test {

struct UnaryCase {
  std::string type;
  Attributes attrs;
  double x, y;  // one hand-computed point
};

class UnaryOps : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryOps, ValueAndGradient) {
  const auto& c = GetParam();
  auto op = make_op(spec_of(c.type, {{DType::f64, Shape{1}}}, c.attrs));
  const std::vector<Tensor> in = {Tensor::from_values<double>(Shape{1}, {c.x})};
  EXPECT_NEAR(op->run_forward(in)[0].get(0), c.y, 1e-12 * std::max(1.0, std::abs(c.y)));

  // Gradient on values away from each function's kinks and outside invalid domains.
  auto op2 = make_op(spec_of(c.type, {{DType::f64, Shape{3, 7}}}, c.attrs));
  const bool positive = c.type == "Sqrt" || c.type == "Log" || c.type == "Reciprocal";
  if (op2->has_gradient())
    expect_gradient_ok(*op2, {random_tensor(DType::f64, Shape{3, 7}, c.type, positive ? 0.5 : -2.5, 2.5)});
}

// y values computed by hand (or from the closed forms in the ONNX operator documentation).
INSTANTIATE_TEST_SUITE_P(
    Reference, UnaryOps,
    ::testing::Values(UnaryCase{"Relu", {}, -1.5, 0.0}, UnaryCase{"Relu", {}, 2.0, 2.0},
                      UnaryCase{"LeakyRelu", {{"alpha", 0.1}}, -2.0, -0.2},
                      UnaryCase{"Sigmoid", {}, 0.0, 0.5},
                      UnaryCase{"Tanh", {}, 0.5, 0.46211715726000974},
                      UnaryCase{"Elu", {}, -1.0, std::exp(-1.0) - 1},
                      UnaryCase{"Selu", {}, 1.0, 1.05070102214050293},
                      UnaryCase{"Gelu", {}, 1.0, 0.8413447460685429},  // x * Phi(x)
                      UnaryCase{"Gelu", {{"approximate", std::string("tanh")}}, 1.0, 0.8411919906082768},
                      UnaryCase{"Softplus", {}, 0.0, std::log(2.0)},
                      UnaryCase{"HardSigmoid", {}, 1.0, 0.7},
                      UnaryCase{"HardSwish", {}, 1.0, 1.0 * (1.0 / 6 + 0.5)},
                      UnaryCase{"Sqrt", {}, 2.25, 1.5}, UnaryCase{"Exp", {}, 1.0, std::exp(1.0)},
                      UnaryCase{"Log", {}, std::exp(2.0), 2.0}, UnaryCase{"Neg", {}, 3.0, -3.0},
                      UnaryCase{"Abs", {}, -4.0, 4.0}, UnaryCase{"Reciprocal", {}, 4.0, 0.25},
                      UnaryCase{"Clip", {{"min", -1.0}, {"max", 1.0}}, 3.0, 1.0}),
    [](const auto& info) { return info.param.type + std::to_string(info.index); });

TEST(UnaryOps, ClipBoundsAsInputs) {
  const auto f = DType::f32;
  auto op = make_op(spec_of("Clip", {{f, Shape{4}}, {f, Shape{}}, {f, Shape{}}}));
  const std::vector<Tensor> in = {Tensor::from_values<float>(Shape{4}, {-3, -0.5f, 0.5f, 3}),
                                  Tensor::from_values<float>(Shape{}, {-1}), Tensor::from_values<float>(Shape{}, {1})};
  EXPECT_EQ(values(op->run_forward(in)[0]), (std::vector<double>{-1, -0.5, 0.5, 1}));
}

// At a bound Clip's derivative is a choice: zero, as Relu's at 0 and PyTorch's hardtanh.
TEST(UnaryOps, ClipGradientIsZeroAtTheBounds) {
  OpSpec spec = spec_of("Clip", {{DType::f32, Shape{5}}}, {{"min", 0.0}, {"max", 6.0}});
  spec.opset = 6;  // bounds as attributes
  auto op = make_op(spec);
  const std::vector<Tensor> in = {Tensor::from_values<float>(Shape{5}, {-1, 0, 3, 6, 7})};
  const auto out = op->run_forward(in);
  Tensor gy(DType::f32, Shape{5});
  gy.fill(1);
  const std::vector<Tensor> gys = {gy};
  EXPECT_EQ(values(op->run_backward(gys, in, out)[0]), (std::vector<double>{0, 0, 1, 0, 0}));
}

TEST(UnaryOps, IntegerReluAndFloatOnlyRefusal) {
  auto op = make_op(spec_of("Relu", {{DType::i32, Shape{3}}}));
  const std::vector<Tensor> in = {Tensor::from_values<int32_t>(Shape{3}, {-2, 0, 5})};
  EXPECT_EQ(values(op->run_forward(in)[0]), (std::vector<double>{0, 0, 5}));
  EXPECT_THROW(make_op(spec_of("Sigmoid", {{DType::i32, Shape{3}}})), InvalidArgument);
}

TEST(UnaryOps, GradientCheckerCatchesAWrongBackward) {
  // A deliberately wrong derivative must FAIL, or the checker proves nothing.
  struct WrongExp : Operator {
    explicit WrongExp(const OpSpec& s) : Operator(s, {s.inputs[0]}) {}
    std::string implementation() const override { return "wrong"; }
    void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
      for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, std::exp(in[0].get(i)));
    }
    std::vector<bool> differentiable_inputs() const override { return {true}; }
    void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                  std::span<Tensor> gx) override {
      for (int64_t i = 0; i < in[0].numel(); ++i) gx[0].set(i, gy[0].get(i) * 1.01 * std::exp(in[0].get(i)));
    }
  };
  WrongExp op(spec_of("Exp", {{DType::f64, Shape{5}}}));
  const std::vector<Tensor> in = {random_tensor(DType::f64, Shape{5}, "w")};
  const auto r = test_gradient(op, in);
  EXPECT_EQ(r.state, CaseState::Failed) << r.detail;
}

TEST(UnaryOps, ReluAtItsKinkIsSkippedNotFailed) {
  auto op = make_op(spec_of("Relu", {{DType::f64, Shape{2}}}));
  const std::vector<Tensor> in = {Tensor::from_values<double>(Shape{2}, {0.0, 1.0})};
  const auto r = test_gradient(*op, in);
  EXPECT_EQ(r.non_smooth, 1);
  EXPECT_EQ(r.checked, 1);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
}

TEST(UnaryOps, UnknownOpIsUnimplementedNamingIt) {
  try {
    make_op(spec_of("Frobnicate", {{DType::f32, Shape{1}}}));
    FAIL();
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("Frobnicate"), std::string::npos);
  }
}

}  // namespace d5::test
