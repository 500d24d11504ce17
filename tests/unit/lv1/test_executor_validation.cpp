// test_executor and test_executor_backprop: every executor against the reference executor, and
// wrong results caught with the tensor named.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/backends/builtin.h"
#include "deep500/net/executor_validation.h"
#include "deep500/op/native_op.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

class ExecutorValidationTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

void expect_agrees_with_reference(Network& net, int64_t classes, const std::string& backend) {
  auto ex = make_executor(net, backend);
  ReferenceExecutor ref(net);
  const auto feeds = test::feeds_for(net, classes);
  const auto fwd = test_executor(*ex, feeds, ref);
  EXPECT_EQ(fwd.state, CaseState::Passed) << fwd.detail;
  EXPECT_EQ(fwd.outputs.size(), net.outputs().size());
  const auto bwd = test_executor_backprop(*ex, feeds, "loss_value", ref);
  EXPECT_EQ(bwd.state, CaseState::Passed) << bwd.detail;
  // Outputs, the loss, and one entry per parameter gradient.
  EXPECT_EQ(bwd.outputs.size(), net.outputs().size() + 1 + net.get_params().size()) << bwd.detail;
  size_t gradients = 0;
  for (const auto& e : bwd.extra["outputs"]) gradients += e["name"].get<std::string>().ends_with("@grad");
  EXPECT_EQ(gradients, net.get_params().size());
}

TEST_P(ExecutorValidationTest, OutputsAndEveryGradientMatchTheReference) {
  const std::string backend = GetParam();
  {
    Network net = test::mlp(8, 10, 16, 4);
    expect_agrees_with_reference(net, 4, backend);
  }
  {
    Network net = test::cnn(4, 3);
    expect_agrees_with_reference(net, 3, backend);
  }
  {
    Network net = test::residual(4, 8, 3);
    expect_agrees_with_reference(net, 3, backend);
  }
  {
    Network net = test::shape_chain(3, 3);
    expect_agrees_with_reference(net, 3, backend);
  }
}

// Every executor but the reference: compared with itself it could not fail. The reference
// executor has oracles of its own: a computation by hand (test_operator_executor.cpp) and finite
// differences of the whole network (test_executor_training.cpp).
std::vector<std::string> backends_to_test() {
  register_builtin_operators();
  std::vector<std::string> others;
  for (const auto& b : executor_backends())
    if (b != "reference") others.push_back(b);
  return others;
}

// A build with the reference executor alone has nothing to compare.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ExecutorValidationTest);
INSTANTIATE_TEST_SUITE_P(Executors, ExecutorValidationTest, ::testing::ValuesIn(backends_to_test()),
                         [](const auto& info) { return info.param; });

// Two executors whose forward passes agree within rounding but put one Relu input on different
// sides of 0 compute different gradients, legitimately: MISTRUSTED with the reason, not FAILED.
// The same crossing with outputs that disagree stays FAILED.
TEST(ExecutorValidation, GradientMismatchFromAKinkCrossingIsMistrusted) {
  register_builtin_operators();
  Network ref_net = test::mlp(1, 4, 3, 2);
  Network ex_net = test::mlp(1, 4, 3, 2);
  const auto feeds = test::feeds_for(ref_net, 2);
  test::set_first_preactivation(ref_net, feeds, 1e-6);  // h[0, 0] = +1e-6: the Relu passes its gradient
  test::set_first_preactivation(ex_net, feeds, -1e-6);  // h[0, 0] = -1e-6: it does not
  ReferenceExecutor ref(ref_net), ex(ex_net);
  const auto r = test_executor_backprop(ex, feeds, "loss_value", ref);
  EXPECT_EQ(r.state, CaseState::Mistrusted) << r.detail;
  EXPECT_NE(r.detail.find("1 Relu or Clip input element(s) lie on the other side of a kink"), std::string::npos)
      << r.detail;
  EXPECT_NE(r.detail.find("gradient 'W1@grad'"), std::string::npos) << r.detail;
  // The probe outputs are gone again.
  EXPECT_EQ(ex_net.outputs(), std::vector<std::string>{"logits"});
  EXPECT_EQ(ref_net.outputs(), std::vector<std::string>{"logits"});

  test::set_first_preactivation(ref_net, feeds, 0.5);  // still a crossing, but the logits now differ far beyond rounding
  ReferenceExecutor ref2(ref_net);
  const auto f = test_executor_backprop(ex, feeds, "loss_value", ref2);
  EXPECT_EQ(f.state, CaseState::Failed) << f.detail;
}

// A reference executor whose second layer's weight gradient is wrong by a fraction of its largest
// element, as a bug in a backward kernel would make it.
class WrongSecondLayerGradient : public ReferenceExecutor {
 public:
  using ReferenceExecutor::ReferenceExecutor;
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override {
    TensorMap out = ReferenceExecutor::inference_and_backprop(feeds, loss);
    Tensor g = network().fetch_tensor("W2@grad");
    double largest = 0;
    for (int64_t i = 0; i < g.numel(); ++i) largest = std::max(largest, std::abs(g.get(i)));
    g.set(0, g.get(0) + 0.2 * largest);
    return out;
  }
};

// A crossing can change only the gradients of the parameters before it: a wrong gradient of a
// parameter after every crossing (W2, after the Relu whose input crossed) is not excused by it
// and stays FAILED, naming that gradient; the same crossing alone is MISTRUSTED (above).
TEST(ExecutorValidation, AWrongGradientNoCrossingReachesStaysFailed) {
  register_builtin_operators();
  Network ref_net = test::mlp(1, 4, 3, 2);
  Network ex_net = test::mlp(1, 4, 3, 2);
  const auto feeds = test::feeds_for(ref_net, 2);
  test::set_first_preactivation(ref_net, feeds, 1e-6);
  test::set_first_preactivation(ex_net, feeds, -1e-6);
  ReferenceExecutor ref(ref_net);
  WrongSecondLayerGradient ex(ex_net);
  const auto r = test_executor_backprop(ex, feeds, "loss_value", ref);
  EXPECT_EQ(r.state, CaseState::Failed) << r.detail;
  EXPECT_NE(r.detail.find("not a kink effect for gradient(s) 'W2@grad': no crossing lies after their parameters (1 "
                          "Relu or Clip input element(s) lie on the other side of a kink"),
            std::string::npos)
      << r.detail;
  EXPECT_EQ(r.extra["kink_unexplained"], nlohmann::json::array({"W2@grad"}));
  EXPECT_EQ(r.extra["kink_crossing_tensors"], (nlohmann::json::array({{{"tensor", "h"}, {"elements", 1}}})));
}

// An executor whose training step computes the first pre-activation otherwise than its inference
// does (LibTorch under autograd picks other kernels): h[0, 0] is +1e-6 in its inference, as in
// the reference, and -1e-6 in the step whose gradients are compared.
class OtherForwardWhenTraining : public ReferenceExecutor {
 public:
  using ReferenceExecutor::ReferenceExecutor;
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override {
    test::set_first_preactivation(network(), feeds, -1e-6);
    TensorMap out = ReferenceExecutor::inference_and_backprop(feeds, loss);
    test::set_first_preactivation(network(), feeds, 1e-6);
    return out;
  }
};

// The crossing lies in the training step, where the gradients come from: the kink check reads
// the sides there, so the case is MISTRUSTED. Read from inference passes, which agree, it found
// no crossing and the case was FAILED.
TEST(ExecutorValidation, KinkSidesAreReadFromTheTrainingStep) {
  register_builtin_operators();
  Network ref_net = test::mlp(1, 4, 3, 2);
  Network ex_net = test::mlp(1, 4, 3, 2);
  const auto feeds = test::feeds_for(ref_net, 2);
  test::set_first_preactivation(ref_net, feeds, 1e-6);
  test::set_first_preactivation(ex_net, feeds, 1e-6);
  ReferenceExecutor ref(ref_net);
  OtherForwardWhenTraining ex(ex_net);
  const auto r = test_executor_backprop(ex, feeds, "loss_value", ref);
  EXPECT_EQ(r.state, CaseState::Mistrusted) << r.detail;
  EXPECT_EQ(r.extra["kink_crossing_tensors"], (nlohmann::json::array({{{"tensor", "h"}, {"elements", 1}}})));
  EXPECT_EQ(ex_net.outputs(), std::vector<std::string>{"logits"});
}

// ReLU6, Clip(0, 6), switches its gradient at 6 too (MobileNetV2's activation): an element within
// rounding of 6, on different sides in the two executors, is a kink crossing as well.
TEST(ExecutorValidation, AClipInputAcrossItsUpperBoundIsAKinkCrossingToo) {
  register_builtin_operators();
  auto relu6_mlp = [] {
    Network net = test::mlp(1, 4, 3, 2);
    Node& clip = net.mutable_node("relu");
    clip.op_type = "Clip";
    clip.inputs = {"h", "clip_min", "clip_max"};
    Tensor lo(DType::f32, Shape{}), hi(DType::f32, Shape{});
    lo.fill(0);
    hi.fill(6);
    net.feed_tensor("clip_min", lo);
    net.feed_tensor("clip_max", hi);
    return net;
  };
  Network ref_net = relu6_mlp(), ex_net = relu6_mlp();
  const auto feeds = test::feeds_for(ref_net, 2);
  test::set_first_preactivation(ref_net, feeds, 6 - 1e-5);  // h[0, 0] just below 6: the gradient passes
  test::set_first_preactivation(ex_net, feeds, 6 + 1e-5);   // just above: clipped, no gradient
  ReferenceExecutor ref(ref_net), ex(ex_net);
  const auto r = test_executor_backprop(ex, feeds, "loss_value", ref);
  EXPECT_EQ(r.state, CaseState::Mistrusted) << r.detail;
  EXPECT_NE(r.detail.find("1 Relu or Clip input element(s) lie on the other side of a kink"), std::string::npos)
      << r.detail;
  EXPECT_EQ(ex_net.outputs(), std::vector<std::string>{"logits"});
}

TEST(ExecutorValidation, WrongReferenceOutputsFailNamingTheTensor) {
  register_builtin_operators();
  Network net = test::mlp(4, 6, 8, 3);
  ReferenceExecutor ex(net);
  const auto feeds = test::feeds_for(net, 3);
  TensorMap ref = ex.inference(feeds);
  ref["logits"] = ref["logits"].clone();
  const auto ok = test_executor(ex, feeds, ref);
  EXPECT_EQ(ok.state, CaseState::Passed) << ok.detail;
  ref["logits"].set(5, ref["logits"].get(5) + 0.01);
  const auto bad = test_executor(ex, feeds, ref);
  EXPECT_EQ(bad.state, CaseState::Failed);
  EXPECT_NE(bad.detail.find("output 'logits': 1 of 12 elements outside tolerance; worst element [1, 2]"),
            std::string::npos)
      << bad.detail;
  ref["missing"] = ref["logits"];
  const auto missing = test_executor(ex, feeds, ref);
  EXPECT_EQ(missing.state, CaseState::Failed);
  EXPECT_NE(missing.detail.find("output 'missing' was not produced"), std::string::npos) << missing.detail;
}

// A Tanh whose backward is 10% off, on a backend of its own: its forward is right, so only the
// gradients can tell.
void register_skewed_tanh() {
  OpRegistry::global().add_or_replace({"Tanh", "skewed", "skewed", true,
                                       [](const OpSpec& s) -> OpCreateResult {
                                         return custom_op_from_native(
                                             s, {s.inputs[0]},
                                             [](std::span<const Tensor> in, std::span<Tensor> out) {
                                               for (int64_t i = 0; i < in[0].numel(); ++i)
                                                 out[0].set(i, std::tanh(in[0].get(i)));
                                             },
                                             [](std::span<const Tensor> g, std::span<const Tensor>,
                                                std::span<const Tensor> out, std::span<Tensor> gin) {
                                               for (int64_t i = 0; i < out[0].numel(); ++i)
                                                 gin[0].set(i, 1.1 * (1 - out[0].get(i) * out[0].get(i)) *
                                                                   g[0].get(i));
                                             },
                                             {.implementation = "skewed", .differentiable = {}, .flops = 0});
                                       },
                                       "a wrong backward, for testing"});
}

TEST(ExecutorValidation, AWrongGradientFailsNamingTheParameter) {
  register_builtin_operators();
  register_skewed_tanh();
  Network net = test::residual(4, 8, 3);
  OperatorExecutor ex(net, "skewed", {"skewed", "reference"});
  EXPECT_EQ(ex.implementations().at("tanh"), "skewed");
  EXPECT_EQ(ex.fallbacks().size(), net.nodes().size() - 1);  // everything else runs on the reference
  ReferenceExecutor ref(net);
  const auto feeds = test::feeds_for(net, 3);
  EXPECT_EQ(test_executor(ex, feeds, ref).state, CaseState::Passed);
  const auto r = test_executor_backprop(ex, feeds, "loss_value", ref);
  EXPECT_EQ(r.state, CaseState::Failed);
  // A and B sit before the Tanh, so their gradients are 10% off; C after it is right.
  const bool names_a_or_b = r.detail.find("gradient 'A@grad'") != std::string::npos ||
                            r.detail.find("gradient 'B@grad'") != std::string::npos;
  EXPECT_TRUE(names_a_or_b) << r.detail;
  for (const auto& e : r.extra["outputs"])
    if (e["name"] == "C@grad") {
      EXPECT_EQ(e["mismatches"], 0);
    }
}

TEST(ExecutorValidation, NetworkToleranceIsTheLoosestOfItsOps) {
  const Tolerance plain = network_tolerance(DType::f32, {"Relu", "Add"});
  EXPECT_DOUBLE_EQ(plain.rtol, 1e-4);
  const Tolerance mixed = network_tolerance(DType::f32, {"Relu", "Gemm", "Tanh"});
  EXPECT_DOUBLE_EQ(mixed.rtol, 1e-3);  // Gemm's 10x
  EXPECT_DOUBLE_EQ(mixed.atol, 1e-5);  // 10x for both
}

}  // namespace
}  // namespace d5
