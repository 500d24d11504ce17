// Extending an installed deep500: a new operator ("Square", y = x^2, with its gradient 2x) on the
// reference backend and a new optimizer ("signsgd", p -= lr * sign(g)), each registered from this
// program and then used through deep500's own machinery: the operator validated by test_forward
// and test_gradient and run inside a network on the reference executor, the optimizer training
// that network by name. Exit 0 only when every check passed.
#include <cmath>
#include <cstdio>

#include "deep500/backends/builtin.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/network.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/op_traits.h"
#include "deep500/op/validation.h"
#include "deep500/train/optimizer.h"

namespace {

using namespace d5;

class SquareOp : public Operator {
 public:
  explicit SquareOp(const OpSpec& s) : Operator(s, {s.inputs.at(0)}) {}
  std::string implementation() const override { return "extend_deep500:square"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, in[0].get(i) * in[0].get(i));
  }
  std::vector<bool> differentiable_inputs() const override { return {true}; }
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    for (int64_t i = 0; i < in[0].numel(); ++i) gx[0].set(i, gy[0].defined() ? 2 * in[0].get(i) * gy[0].get(i) : 0);
  }
};

class SignSgd : public UpdateRuleOptimizer {
 public:
  explicit SignSgd(const Hyperparameters& h) : UpdateRuleOptimizer({{"lr", 0.01}}, h) {}
  std::string name() const override { return "signsgd"; }
  void update_rule(const Tensor& grad, Tensor& param, const std::string&) override {
    const double lr = current_learning_rate();
    for (int64_t i = 0; i < param.numel(); ++i) {
      const double g = grad.get(i);
      param.set(i, param.get(i) - lr * (g > 0 ? 1 : g < 0 ? -1 : 0));
    }
  }
};

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

}  // namespace

int main() {
  register_builtin_operators();
  OpRegistry::global().add({"Square", "reference", "extend_deep500", true,
                            [](const OpSpec& s) -> OpCreateResult { return std::make_unique<SquareOp>(s); },
                            "from extend_deep500"});
  register_op_traits({"Square", 0, NumericClass::elementwise});
  register_optimizer("signsgd", "sign SGD, from extend_deep500",
                     [](const Hyperparameters& h) { return std::make_unique<SignSgd>(h); });

  // The operator through Level 0's checks.
  OpSpec spec;
  spec.type = "Square";
  spec.inputs = {TensorDesc{DType::f64, Shape{2, 3}}};
  auto op = OpRegistry::global().create(spec, "reference");
  Tensor x = Tensor::from_values<double>(Shape{2, 3}, {-1.5, -0.5, 0.25, 1, 2, 3});
  const Tensor expected = Tensor::from_values<double>(Shape{2, 3}, {2.25, 0.25, 0.0625, 1, 4, 9});
  expect(test_forward(*op, std::span(&x, 1), std::span(&expected, 1)).state == CaseState::Passed,
         "Square forward matches hand-computed values");
  expect(test_gradient(*op, std::span(&x, 1)).state == CaseState::Passed, "Square gradient matches finite differences");

  // A network y = sum(Square(w * input)) on the reference executor, trained by the new optimizer.
  Network net("extend");
  net.add_input("input", TensorDesc{DType::f32, Shape{4}});
  net.feed_tensor("w", Tensor::from_values<float>(Shape{4}, {1.0f, -2.0f, 0.5f, 3.0f}), /*is_param=*/true);
  net.add_node({"scale", "Mul", "", {}, {"input", "w"}, {"scaled"}});
  net.add_node({"square", "Square", "", {}, {"scaled"}, {"squared"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"squared"}, {"loss"}});
  net.add_output("loss");
  auto executor = make_executor(net, "reference");
  auto optimizer = make_optimizer("signsgd", {{"lr", 0.25}});
  const TensorMap feeds = {{"input", Tensor::from_values<float>(Shape{4}, {1, 1, 1, 1})}};
  const double first = executor->inference(feeds).at("loss").get(0);
  for (int step = 0; step < 4; ++step) optimizer->step(*executor, feeds, "loss");
  const double last = executor->inference(feeds).at("loss").get(0);
  std::printf("loss %.4f -> %.4f after 4 signsgd steps\n", first, last);
  // By hand: w moves by 0.25 towards 0 per step and stays at 0 (sign 0): {1, -2, 0.5, 3} ->
  // {0, -1, 0, 2}, all exact in binary.
  expect(std::abs(first - 14.25) < 1e-6, "the network's loss starts at 1 + 4 + 0.25 + 9");
  expect(std::abs(last - 5.0) < 1e-6, "signsgd took the loss to 0 + 1 + 0 + 4 through Square's gradient");
  return failures == 0 ? 0 : 1;
}
