// The LibTorch graph executor against the reference executor: outputs and every parameter gradient
// of small networks (test_executor_backprop), parameters shared with the network without copies,
// events, fallbacks and bad input; and on a device (the tests' host-memory one).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backends/torch/aten_math.h"
#include "backends/torch/aten_memory.h"
#include "backends/torch/torch_executor.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/framework_memory.h"
#include "deep500/net/net_bench.h"
#include "deep500/net/graph_executor.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "deep500/core/rng.h"
#include "deep500/op/validation.h"
#include "deep500/train/optimizer.h"
#include "deep500/core/build_info.h"
#include "deep500/core/math_mode.h"
#include "../test_memory_device.h"
#include "../../support/case_metric.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace d5 {
namespace {

// Where the executor is compared with itself (a gradient an event saw against the one stored):
// the same ATen results, copied; only a wrong tensor would differ.
constexpr Tolerance kSame{1e-6, 0};

Tensor random(DType t, const Shape& shape, const std::string& name, double lo = -1, double hi = 1) {
  Tensor x(t, shape);
  RngStream r(77, name);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, is_floating(t) ? r.uniform(lo, hi) : std::floor(r.uniform(lo, hi)));
  return x;
}

void param(Network& net, const std::string& name, const Shape& shape, double scale = 0.5) {
  net.feed_tensor(name, random(DType::f32, shape, name, -scale, scale), true);
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what, Tolerance tol) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const auto c = compare_output(actual, expected, tol, 0);
  EXPECT_EQ(c.mismatches + c.nonfinite_mismatches, 0) << what << ": " << describe_worst(c, expected.shape());
}

// A training step on the torch executor against one of the reference executor on the same network:
// outputs, loss and every parameter gradient, with Level 1's tolerances (network_tolerance: the
// loosest default tolerance of the ops a result goes through, f32 Gemm/Conv rtol 1e-3).
void expect_step_matches_reference(Network& net, GraphExecutor& ex, const TensorMap& feeds, const std::string& loss) {
  ReferenceExecutor ref(net);
  const auto check = test_executor_backprop(ex, feeds, loss, ref);
  EXPECT_EQ(check.state, CaseState::Passed) << check.detail;
  // Every output, the loss and every gradient were compared.
  EXPECT_EQ(check.outputs.size(), net.outputs().size() + 1 + net.gradient().size()) << check.detail;
}

// Inference on the torch executor against the reference executor.
void expect_inference_matches_reference(Network& net, GraphExecutor& ex, const TensorMap& feeds) {
  ReferenceExecutor ref(net);
  const auto check = test_executor(ex, feeds, ref);
  EXPECT_EQ(check.state, CaseState::Passed) << check.detail;
  EXPECT_EQ(check.outputs.size(), net.outputs().size());
}

class TorchExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

// x[8,16] -> Gemm -> Relu -> Gemm -> logits; SoftmaxCrossEntropyLoss(logits, labels) -> loss.
Network mlp() {
  Network net("mlp");
  net.add_input("x", TensorDesc{DType::f32, Shape{8, 16}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{8}});
  param(net, "W1", Shape{32, 16});
  param(net, "b1", Shape{32});
  param(net, "W2", Shape{10, 32});
  param(net, "b2", Shape{10});
  const Attributes tb{{"transB", int64_t{1}}};
  net.add_node({"fc1", "Gemm", "", tb, {"x", "W1", "b1"}, {"h"}});
  net.add_node({"relu", "Relu", "", {}, {"h"}, {"a"}});
  net.add_node({"fc2", "Gemm", "", tb, {"a", "W2", "b2"}, {"logits"}});
  net.add_node({"xent", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss"}});
  net.add_output("logits");
  return net;
}

TensorMap mlp_feeds(int seed = 0) {
  return {{"x", random(DType::f32, Shape{8, 16}, fmt::format("x{}", seed))},
          {"labels", random(DType::i64, Shape{8}, fmt::format("labels{}", seed), 0, 10)}};
}

// x[4,3,12,12] -> Conv(pad 1) -> BatchNormalization (training mode) -> Relu -> MaxPool 2x2 ->
// Flatten -> Gemm -> SoftmaxCrossEntropyLoss.
Network cnn() {
  Network net("cnn");
  net.add_input("x", TensorDesc{DType::f32, Shape{4, 3, 12, 12}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{4}});
  param(net, "conv_w", Shape{6, 3, 3, 3});
  param(net, "conv_b", Shape{6});
  param(net, "bn_scale", Shape{6});
  param(net, "bn_bias", Shape{6});
  net.feed_tensor("bn_mean", Tensor(DType::f32, Shape{6}));
  Tensor var(DType::f32, Shape{6});
  var.fill(1);
  net.feed_tensor("bn_var", var);
  param(net, "fc_w", Shape{5, 6 * 6 * 6}, 0.1);
  param(net, "fc_b", Shape{5});
  net.add_node({"conv", "Conv", "", Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                {"x", "conv_w", "conv_b"}, {"c"}});
  net.add_node({"bn", "BatchNormalization", "", Attributes{{"training_mode", int64_t{1}}},
                {"c", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"n"}});
  net.add_node({"relu", "Relu", "", {}, {"n"}, {"r"}});
  net.add_node({"pool", "MaxPool", "", Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}},
                                                  {"strides", std::vector<int64_t>{2, 2}}},
                {"r"}, {"p"}});
  net.add_node({"flat", "Flatten", "", {}, {"p"}, {"f"}});
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"f", "fc_w", "fc_b"}, {"logits"}});
  net.add_node({"xent", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss"}});
  net.add_output("logits");
  return net;
}

TEST_F(TorchExecutorTest, MlpStepMatchesReference) {
  Network net = mlp();
  auto ex = make_executor(net, "torch");
  EXPECT_EQ(ex->backend(), "torch");
  expect_step_matches_reference(net, *ex, mlp_feeds(), "loss");
  EXPECT_TRUE(ex->fallbacks().empty());
  EXPECT_EQ(ex->implementations().at("fc1"), "torch:at::addmm");
  EXPECT_EQ(ex->memory().peak_rss_bytes, -1);  // not measured unless asked for
  EXPECT_EQ(ex->memory().peak_tensor_bytes, -1);
  auto* torch_ex = dynamic_cast<torch_backend::TorchExecutor*>(ex.get());
  ASSERT_NE(torch_ex, nullptr);
  torch_ex->set_measure_rss(true);
  ex->inference_and_backprop(mlp_feeds(), "loss");
  EXPECT_GT(ex->memory().peak_rss_bytes, 0);
}

TEST_F(TorchExecutorTest, InferenceMatchesReferenceAndStoresOutputs) {
  Network net = mlp();
  auto ex = make_executor(net, "torch");
  const auto feeds = mlp_feeds(3);
  expect_inference_matches_reference(net, *ex, feeds);
  const auto out = ex->inference(feeds);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(net.fetch_tensor("logits").data(), out.at("logits").data());  // stored in the network
  EXPECT_FALSE(net.has_value("W1@grad"));  // inference computes no gradient
}

TEST_F(TorchExecutorTest, CnnWithBatchNormStepMatchesReference) {
  Network net = cnn();
  auto ex = make_executor(net, "torch");
  const TensorMap feeds{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "img")},
                        {"labels", random(DType::i64, Shape{4}, "lab", 0, 5)}};
  expect_step_matches_reference(net, *ex, feeds, "loss");
  EXPECT_TRUE(ex->fallbacks().empty());
  EXPECT_EQ(ex->implementations().at("conv"), "torch:at::convolution");
}

// h feeds two nodes (a residual block): its gradient is the sum of both paths'.
TEST_F(TorchExecutorTest, ResidualFanOutSumsGradients) {
  Network net("residual");
  net.add_input("x", TensorDesc{DType::f32, Shape{6, 8}});
  net.add_input("target", TensorDesc{DType::f32, Shape{6, 8}});
  param(net, "W1", Shape{8, 8});
  param(net, "W2", Shape{8, 8});
  param(net, "W3", Shape{8, 8});
  net.add_node({"mm1", "MatMul", "", {}, {"x", "W1"}, {"h"}});
  net.add_node({"act", "Tanh", "", {}, {"h"}, {"a"}});
  net.add_node({"mm2", "MatMul", "", {}, {"a", "W2"}, {"b"}});
  net.add_node({"add", "Add", "", {}, {"a", "b"}, {"s"}});
  net.add_node({"mm3", "MatMul", "", {}, {"s", "W3"}, {"y"}});
  net.add_node({"mul", "Mul", "", {}, {"y", "a"}, {"z"}});
  net.add_node({"mse", "MSELoss", "", {}, {"z", "target"}, {"loss"}});
  net.add_output("z");
  auto ex = make_executor(net, "torch");
  const TensorMap feeds{{"x", random(DType::f32, Shape{6, 8}, "rx")}, {"target", random(DType::f32, Shape{6, 8}, "rt")}};
  expect_step_matches_reference(net, *ex, feeds, "loss");
}

// AveragePool with dilations has no ATen kernel: the node runs the reference operator inside the
// autograd graph, and gradients still flow through it to the convolution before it.
// conv -> AveragePool with dilations (which the torch backend refuses) -> Flatten -> Gemm -> loss.
Network with_refused_pool() {
  Network net("fallback");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 2, 7, 7}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{2}});
  param(net, "cw", Shape{3, 2, 2, 2});
  param(net, "fw", Shape{4, 3 * 4 * 4});
  net.add_node({"conv", "Conv", "", {}, {"x", "cw"}, {"c"}});
  net.add_node({"pool", "AveragePool", "", Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}},
                                                      {"dilations", std::vector<int64_t>{2, 2}}},
                {"c"}, {"p"}});
  net.add_node({"flat", "Flatten", "", {}, {"p"}, {"f"}});
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"f", "fw"}, {"logits"}});
  net.add_node({"xent", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss"}});
  net.add_output("logits");
  return net;
}

TEST_F(TorchExecutorTest, RefusedNodeRunsTheReferenceInsideAutograd) {
  Network net = with_refused_pool();
  auto ex = make_executor(net, "torch");
  const TensorMap feeds{{"x", random(DType::f32, Shape{2, 2, 7, 7}, "fx")},
                        {"labels", random(DType::i64, Shape{2}, "fl", 0, 4)}};
  expect_step_matches_reference(net, *ex, feeds, "loss");
  const auto fb = ex->fallbacks();
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].first, "pool");
  EXPECT_NE(fb[0].second.find("dilations"), std::string::npos) << fb[0].second;
  EXPECT_EQ(ex->implementations().at("pool").rfind("reference (fallback: ", 0), 0u) << ex->implementations().at("pool");
  // Inference runs the same fallback without autograd.
  expect_inference_matches_reference(net, *ex, feeds);
}

// An optimizer that updates parameters in place on the network's buffers is seen by the next
// step with no re-wrapping; a parameter replaced with feed_tensor is seen too (one re-wrap).
TEST_F(TorchExecutorTest, ParameterUpdatesAreSeenWithoutCopies) {
  Network net = mlp();
  auto ex_base = make_executor(net, "torch");
  auto* ex = dynamic_cast<torch_backend::TorchExecutor*>(ex_base.get());
  ASSERT_NE(ex, nullptr);
  const auto feeds = mlp_feeds(1);
  ex->inference_and_backprop(feeds, "loss");
  const int64_t wraps = ex->wrap_count();
  for (int step = 0; step < 2; ++step) {
    // SGD in place: p -= 0.1 * g, on the very buffers the network holds.
    for (const auto& [p, g] : net.gradient()) {
      Tensor pt = net.fetch_tensor(p);
      const Tensor gt = net.fetch_tensor(g);
      for (int64_t i = 0; i < pt.numel(); ++i) pt.set(i, pt.get(i) - 0.1 * gt.get(i));
    }
    expect_step_matches_reference(net, *ex, feeds, "loss");
  }
  EXPECT_EQ(ex->wrap_count(), wraps);

  Tensor fresh = random(DType::f32, Shape{32, 16}, "fresh W1");
  net.feed_tensor("W1", fresh);
  expect_step_matches_reference(net, *ex, feeds, "loss");
  EXPECT_EQ(ex->wrap_count(), wraps + 1);
  EXPECT_EQ(ex->plan_count(), 1);  // parameters do not change the network's version
}

TEST_F(TorchExecutorTest, GraphChangesArePlannedAgain) {
  Network net = mlp();
  auto ex_base = make_executor(net, "torch");
  auto* ex = dynamic_cast<torch_backend::TorchExecutor*>(ex_base.get());
  ASSERT_NE(ex, nullptr);
  ex->inference(mlp_feeds());
  net.add_node({"sig", "Sigmoid", "", {}, {"logits"}, {"probs"}});
  net.add_output("probs");
  expect_inference_matches_reference(net, *ex, mlp_feeds());
  EXPECT_EQ(ex->inference(mlp_feeds()).count("probs"), 1u);
  EXPECT_EQ(ex->plan_count(), 2);
}

// A gradient tensor someone else put in the network (the user, or another executor whose
// gradients a caller still holds, as test_executor_backprop does) is replaced, not written.
TEST_F(TorchExecutorTest, AGradientTensorFedByOthersIsReplacedNotWritten) {
  Network net = mlp();
  Tensor mine(DType::f32, Shape{10, 32});
  mine.fill(123);
  net.feed_tensor("W2@grad", mine);
  auto ex = make_executor(net, "torch");
  const auto feeds = mlp_feeds(2);
  ex->inference_and_backprop(feeds, "loss");
  EXPECT_NE(net.fetch_tensor("W2@grad").data(), mine.data());
  for (int64_t i = 0; i < mine.numel(); ++i) ASSERT_EQ(mine.get(i), 123) << i;
  expect_step_matches_reference(net, *ex, feeds, "loss");
}

// The other way of landing gradients (autograd accumulating into views of the d5 tensors, zeroed
// per step) gives the same gradients, step after step, in the same tensors.
TEST_F(TorchExecutorTest, AccumulatingSinkMatchesReferenceToo) {
  Network net = cnn();
  torch_backend::TorchExecutor ex(net, {});
  ex.set_gradient_sink(torch_backend::GradientSink::accumulate);
  const TensorMap feeds{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "img2")},
                        {"labels", random(DType::i64, Shape{4}, "lab2", 0, 5)}};
  expect_step_matches_reference(net, ex, feeds, "loss");
  ex.inference_and_backprop(feeds, "loss");
  const Tensor g = net.fetch_tensor("conv_w@grad");
  const Tensor first = g.clone();
  ex.inference_and_backprop(feeds, "loss");  // zeroed, not accumulated across steps
  // The executor's own gradient tensors, made once and reused by every step.
  EXPECT_EQ(net.fetch_tensor("conv_w@grad").data(), g.data());
  expect_close(net.fetch_tensor("conv_w@grad"), first, "second step's gradient", kSame);
  expect_step_matches_reference(net, ex, feeds, "loss");
  // Switching back to adopting leaves no stale .grad behind.
  ex.set_gradient_sink(torch_backend::GradientSink::adopt);
  expect_step_matches_reference(net, ex, feeds, "loss");
}

// While a step runs the network holds none of the last step's gradients, so that their memory
// is free for this step (a hand-written loop resets .grad likewise); a copy held elsewhere stays.
TEST_F(TorchExecutorTest, TheLastStepsGradientsAreReleasedWhenAStepStarts) {
  Network net = cnn();
  torch_backend::TorchExecutor ex(net, {});
  const TensorMap feeds{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "img4")},
                        {"labels", random(DType::i64, Shape{4}, "lab4", 0, 5)}};
  ex.inference_and_backprop(feeds, "loss");
  const Tensor held = net.fetch_tensor("conv_w@grad");
  const Tensor kept = held.clone();
  struct Probe : ExecutorEvent {
    Network* net = nullptr;
    bool network_had_gradient = true;
    void after_inference(const TensorMap&) override { network_had_gradient = net->has_value("conv_w@grad"); }
  };
  auto probe = std::make_shared<Probe>();
  probe->net = &net;
  ex.add_event(probe);
  ex.inference_and_backprop(feeds, "loss");
  EXPECT_FALSE(probe->network_had_gradient) << "between forward and backward";
  ASSERT_TRUE(net.has_value("conv_w@grad"));
  expect_close(held, kept, "the gradient a caller held", Tolerance{0, 0});
}

// The default sink hands ATen's gradient buffers to the network: each step's gradients are new
// tensors (a gradient held from an earlier step keeps its values), owning what autograd computed.
TEST_F(TorchExecutorTest, AdoptedGradientsAreNewTensorsPerStep) {
  Network net = cnn();
  torch_backend::TorchExecutor ex(net, {});
  EXPECT_EQ(ex.gradient_sink(), torch_backend::GradientSink::adopt);
  const TensorMap feeds{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "img3")},
                        {"labels", random(DType::i64, Shape{4}, "lab3", 0, 5)}};
  ex.inference_and_backprop(feeds, "loss");
  const Tensor g1 = net.fetch_tensor("conv_w@grad");
  const Tensor kept = g1.clone();
  ex.inference_and_backprop(feeds, "loss");
  const Tensor g2 = net.fetch_tensor("conv_w@grad");
  EXPECT_NE(g1.data(), g2.data());
  expect_close(g1, kept, "an earlier step's gradient", Tolerance{0, 0});
  expect_close(g2, kept, "the same step again", kSame);
}

// Dropout in a training step draws a new mask each step, and the gradient goes through the mask
// the step applied: with y = Dropout(x * w), dloss/dw = (mask * scale * x) summed = y / w.
TEST_F(TorchExecutorTest, DropoutDrawsAFreshMaskPerStep) {
  Network net("dropout");
  net.add_input("x", TensorDesc{DType::f32, Shape{64}});
  net.feed_tensor("training", Tensor::from_values<bool>(Shape{}, {true}));
  net.feed_tensor("ratio", Tensor::from_values<float>(Shape{}, {0.5f}));
  param(net, "w", Shape{64});
  net.add_node({"mul", "Mul", "", {}, {"x", "w"}, {"m"}});
  net.add_node({"drop", "Dropout", "", {}, {"m", "ratio", "training"}, {"y"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
  net.add_output("y");
  auto ex = make_executor(net, "torch");
  const TensorMap feeds{{"x", random(DType::f32, Shape{64}, "dx", 0.5, 1)}};
  const Tensor y1 = ex->inference_and_backprop(feeds, "loss").at("y");
  const Tensor g1 = net.fetch_tensor("w@grad").clone();
  const Tensor y2 = ex->inference_and_backprop(feeds, "loss").at("y");
  const Tensor w = net.fetch_tensor("w");
  int64_t dropped = 0, differ = 0;
  for (int64_t i = 0; i < 64; ++i) {
    dropped += y1.get(i) == 0;
    differ += (y1.get(i) == 0) != (y2.get(i) == 0);
    EXPECT_NEAR(g1.get(i), y1.get(i) / w.get(i), 1e-5) << i;
  }
  // 64 draws at ratio 0.5: 0 or 64 drops, or equal masks twice, have probability ~1e-19.
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 64);
  EXPECT_GT(differ, 0);
}

// Records events as "before fc1 forward" strings.
struct Recorder : ExecutorEvent {
  std::vector<std::string> log;
  std::map<std::string, std::vector<Tensor>> backward_outputs;  // node -> gradients it produced
  std::string stop_before;                                      // "node pass" to stop at
  static const char* name(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
  bool before_operator(const Node& node, Pass pass, std::span<const Tensor>) override {
    log.push_back(fmt::format("before {} {}", node.name, name(pass)));
    return stop_before != fmt::format("{} {}", node.name, name(pass));
  }
  bool after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs) override {
    log.push_back(fmt::format("after {} {}", node.name, name(pass)));
    if (pass == Pass::backward)
      for (const auto& t : outputs) backward_outputs[node.name].push_back(t.defined() ? t.clone() : Tensor());
    return true;
  }
  void after_inference(const TensorMap&) override { log.push_back("after inference"); }
  void after_backprop(const TensorMap& g) override { log.push_back(fmt::format("after backprop {}", g.size())); }
};

size_t position(const std::vector<std::string>& log, const std::string& entry) {
  const auto it = std::find(log.begin(), log.end(), entry);
  EXPECT_NE(it, log.end()) << entry;
  return static_cast<size_t>(it - log.begin());
}

TEST_F(TorchExecutorTest, EventsCoverEveryNodeInBothPasses) {
  Network net = mlp();
  auto ex = make_executor(net, "torch");
  auto rec = std::make_shared<Recorder>();
  ex->add_event(rec);
  const auto feeds = mlp_feeds(4);
  expect_step_matches_reference(net, *ex, feeds, "loss");  // events change nothing computed
  const auto& log = rec->log;
  const std::vector<std::string> nodes{"fc1", "relu", "fc2", "xent"};
  for (size_t k = 0; k < nodes.size(); ++k) {
    const auto& n = nodes[k];
    EXPECT_LT(position(log, "before " + n + " forward"), position(log, "after " + n + " forward"));
    EXPECT_LT(position(log, "after inference"), position(log, "before " + n + " backward"));
    EXPECT_LT(position(log, "before " + n + " backward"), position(log, "after " + n + " backward"));
    EXPECT_LT(position(log, "after " + n + " backward"), position(log, "after backprop 4"));
    if (k > 0) {
      EXPECT_LT(position(log, "after " + nodes[k - 1] + " forward"), position(log, "before " + n + " forward"));
      // Reverse order in backward: a node's backward ends before its producer's begins.
      EXPECT_LT(position(log, "after " + n + " backward"), position(log, "before " + nodes[k - 1] + " backward"));
    }
  }
  // fc2's backward produces the gradients of its inputs a, W2 and b2; W2's and b2's are the
  // parameters' whole gradients, as fc2 is their only reader.
  const auto& g = rec->backward_outputs.at("fc2");
  ASSERT_EQ(g.size(), 3u);
  expect_close(g[1], net.fetch_tensor("W2@grad"), "fc2's gradient for W2", kSame);
  expect_close(g[2], net.fetch_tensor("b2@grad"), "fc2's gradient for b2", kSame);
  // fc1 reads the graph input x, which needs no gradient.
  const auto& g1 = rec->backward_outputs.at("fc1");
  ASSERT_EQ(g1.size(), 3u);
  EXPECT_FALSE(g1[0].defined());
}

TEST_F(TorchExecutorTest, AnEventStopsTheRun) {
  Network net = mlp();
  auto ex = make_executor(net, "torch");
  auto rec = std::make_shared<Recorder>();
  ex->add_event(rec);
  rec->stop_before = "fc2 forward";
  const auto out = ex->inference(mlp_feeds());
  EXPECT_TRUE(ex->stopped());
  EXPECT_TRUE(out.empty());  // logits were never computed
  EXPECT_EQ(rec->log.back(), "before fc2 forward");

  rec->log.clear();
  rec->stop_before = "relu backward";
  const auto train = ex->inference_and_backprop(mlp_feeds(), "loss");
  EXPECT_TRUE(ex->stopped());
  EXPECT_EQ(train.count("loss"), 1u);  // the forward pass completed
  EXPECT_EQ(std::count(rec->log.begin(), rec->log.end(), "before fc1 backward"), 0);
  EXPECT_EQ(std::count(rec->log.begin(), rec->log.end(), "after backprop 4"), 0);

  rec->stop_before.clear();
  ex->inference(mlp_feeds());
  EXPECT_FALSE(ex->stopped());
}

TEST_F(TorchExecutorTest, BadInputIsNamed) {
  Network net = mlp();
  auto ex = make_executor(net, "torch");
  try {
    ex->inference_and_backprop(mlp_feeds(), "no_such_tensor");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'no_such_tensor'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ex->inference_and_backprop(mlp_feeds(), "logits"), InvalidArgument);  // not one value
  TensorMap missing = mlp_feeds();
  missing.erase("labels");
  EXPECT_THROW(ex->inference(missing), InvalidArgument);
  TensorMap wrong = mlp_feeds();
  wrong["x"] = Tensor(DType::f32, Shape{8, 15});
  EXPECT_THROW(ex->inference(wrong), InvalidArgument);
  // Labels out of range: ATen's error, named after the node, not a crash.
  TensorMap bad_labels = mlp_feeds();
  bad_labels["labels"].fill(99);
  try {
    ex->inference_and_backprop(bad_labels, "loss");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'xent'"), std::string::npos) << e.what();
  }
  // Inference runs only what the graph outputs need, and the loss is not among it.
  EXPECT_NO_THROW(ex->inference(bad_labels));
}

// ---- on a device --------------------------------------------------------------------------
// The tests' host-memory device "testmem" (test_memory_device.h) read as ATen's CPU memory: every
// placement path a GPU takes runs here. Values must equal the host run's bit for bit (the same
// ATen kernels on the same values); copies are counted against what the placement predicts.

// Why this build cannot run the torch executor on cuda:0, or "" where it can.
std::string no_cuda_torch_reason() {
  if (torch_backend::libtorch_cuda_build() != "built with CUDA")
    return "no CUDA LibTorch: LibTorch " TORCH_VERSION " was built without CUDA";
  if (is_not_built_backend("cuda")) return "no CUDA backend: d5 was built without it";
  if (torch::cuda::device_count() == 0) return "no CUDA device: LibTorch sees none";
  return "";
}

class TorchOnDevice : public TorchExecutorTest {
 protected:
  static void SetUpTestSuite() {
    TorchExecutorTest::SetUpTestSuite();
    test::test_memory_device();
    torch_backend::register_aten_device("testmem", at::kCPU);
  }
  static std::unique_ptr<GraphExecutor> on_testmem(Network& net) {
    ExecutorOptions eo;
    eo.device = "testmem:0";
    return make_executor(net, "torch", eo);
  }
};

void expect_bits(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined() && expected.defined()) << what;
  const Tensor a = actual.to(Device::cpu()), e = expected.to(Device::cpu());
  ASSERT_EQ(a.desc(), e.desc()) << what;
  EXPECT_EQ(std::memcmp(a.data(), e.data(), a.bytes()), 0) << what;
}

// Records the device of every tensor a forward event sees.
struct DeviceSeen : ExecutorEvent {
  std::set<std::string> devices;
  bool before_operator(const Node&, Pass pass, std::span<const Tensor> inputs) override {
    for (const auto& t : inputs)
      if (pass == Pass::forward && t.defined()) devices.insert(t.device().to_string());
    return true;
  }
};

TEST_F(TorchOnDevice, ATrainingStepEqualsTheHostsWithParametersMovedOnceAndGradientsLeftThere) {
  const std::vector<std::string> params{"W1", "b1", "W2", "b2"};
  for (const auto sink : {torch_backend::GradientSink::adopt, torch_backend::GradientSink::accumulate}) {
    SCOPED_TRACE(sink == torch_backend::GradientSink::adopt ? "adopt" : "accumulate");
    Network host_net = mlp(), dev_net = mlp();
    auto host = make_executor(host_net, "torch");
    auto dev = on_testmem(dev_net);
    auto& torch = dynamic_cast<torch_backend::TorchExecutor&>(*dev);
    EXPECT_EQ(torch.placement().device.to_string(), "testmem:0");
    dynamic_cast<torch_backend::TorchExecutor&>(*host).set_gradient_sink(sink);
    torch.set_gradient_sink(sink);
    auto seen = std::make_shared<DeviceSeen>();
    dev->add_event(seen);
    const auto allocator = test::test_memory_allocator();
    for (int step = 0; step < 2; ++step) {
      const TensorMap feeds = mlp_feeds(step);
      const int syncs = allocator->synchronizations;
      const TensorMap want = host->inference_and_backprop(feeds, "loss");
      const TensorMap got = dev->inference_and_backprop(feeds, "loss");
      // Each copy d5 makes (Tensor::to: parameters and feeds) waits for itself, ATen copies the 2
      // outputs to the host, and the call waits once more at its end, for its backward pass.
      const ExecutorMemory m = dev->memory();
      EXPECT_EQ(allocator->synchronizations, syncs + (m.transfers - 2) + 1);
      for (const std::string name : {"logits", "loss"}) {
        EXPECT_EQ(got.at(name).device(), Device::cpu()) << name;  // the caller reads outputs on the host
        expect_bits(got.at(name), want.at(name), name);
      }
      for (const auto& p : params) {
        EXPECT_EQ(dev_net.fetch_tensor(p).device().to_string(), "testmem:0") << p;
        const Tensor g = dev_net.fetch_tensor(Network::gradient_name(p));
        EXPECT_EQ(g.device().to_string(), "testmem:0") << p;
        expect_bits(g, host_net.fetch_tensor(Network::gradient_name(p)), p + "'s gradient");
      }
      // In: the 4 parameters at the first call only, and both feeds; out: logits and the loss.
      const int64_t feed_bytes = 8 * 16 * 4 + 8 * 8, output_bytes = 8 * 10 * 4 + 4;
      const int64_t param_bytes = (32 * 16 + 32 + 10 * 32 + 10) * 4;
      EXPECT_EQ(m.transfers, (step == 0 ? 4 : 0) + 2 + 2) << "step " << step;
      EXPECT_EQ(m.transfer_bytes, (step == 0 ? param_bytes : 0) + feed_bytes + output_bytes) << "step " << step;
    }
    EXPECT_EQ(seen->devices, std::set<std::string>{"testmem:0"});
    // A feed already on the device is read there: only the labels come in.
    TensorMap feeds = mlp_feeds(2);
    feeds["x"] = feeds["x"].to(test::test_memory_device());
    dev->inference_and_backprop(feeds, "loss");
    EXPECT_EQ(dev->memory().transfers, 1 + 2);
    // Resident inputs and outputs (d5 net --resident-io): feeds placed where they are read, outputs
    // left where they are made; a steady-state step copies nothing.
    const auto where = dev->feed_devices("loss");
    ASSERT_EQ(where.size(), 2u);
    for (const auto& [name, device] : where) feeds[name] = feeds[name].to(device);
    ASSERT_TRUE(dev->keep_outputs_on_device());
    const TensorMap resident = dev->inference_and_backprop(feeds, "loss");
    EXPECT_EQ(dev->memory().transfers, 0);
    EXPECT_EQ(resident.at("loss").device().to_string(), "testmem:0");
    Network plain = mlp();
    auto on_host = make_executor(plain, "torch");
    EXPECT_TRUE(on_host->feed_devices("loss").empty());
    EXPECT_FALSE(on_host->keep_outputs_on_device());
  }
}

TEST_F(TorchOnDevice, InferenceEqualsTheHostsWithConstantsOnTheDevice) {
  Network host_net = cnn(), dev_net = cnn();
  auto host = make_executor(host_net, "torch");
  auto dev = on_testmem(dev_net);
  const TensorMap feeds{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "cx")},
                        {"labels", random(DType::i64, Shape{4}, "cl", 0, 5)}};
  for (int call = 0; call < 2; ++call) {
    const TensorMap got = dev->inference(feeds);
    expect_bits(got.at("logits"), host->inference(feeds).at("logits"), "logits");
    // 6 parameters at the first call (the batch-norm statistics are constants, placed when
    // planned), 2 feeds and the logits.
    EXPECT_EQ(dev->memory().transfers, (call == 0 ? 6 : 0) + 2 + 1) << "call " << call;
  }
}

// torch::optim twins update parameters where the executor keeps them: on the device, through
// views of ATen's device there, equal bit for bit to the same twin on the host (the same ATen
// kernels on the same values), the parameters never copied back.
TEST_F(TorchOnDevice, TorchOptimTwinsUpdateTheParametersOnTheDevice) {
  for (const char* optimizer : {"torch-momentum", "torch-adam"}) {
    SCOPED_TRACE(optimizer);
    Network host_net = mlp(), dev_net = mlp();
    auto host = make_executor(host_net, "torch");
    auto dev = on_testmem(dev_net);
    auto host_opt = make_optimizer(optimizer, {{"lr", 0.05}});
    auto dev_opt = make_optimizer(optimizer, {{"lr", 0.05}});
    for (int step = 0; step < 3; ++step) {
      host_opt->step(*host, mlp_feeds(step), "loss");
      dev_opt->step(*dev, mlp_feeds(step), "loss");
    }
    EXPECT_EQ(dev->memory().transfers, 2 + 2) << "only the last step's feeds and outputs";
    for (const std::string p : {"W1", "b1", "W2", "b2"}) {
      EXPECT_EQ(dev_net.fetch_tensor(p).device().to_string(), "testmem:0") << p;
      expect_bits(dev_net.fetch_tensor(p), host_net.fetch_tensor(p), p);
    }
    EXPECT_NE(std::memcmp(host_net.fetch_tensor("W1").data(), mlp().fetch_tensor("W1").data(),
                          host_net.fetch_tensor("W1").bytes()),
              0)
        << "the steps changed nothing";
  }
}

// --breakdown on a device: every node, in both passes, timed by the device's clock and read after
// the call. The test device's clock reads 1000 s per timing, which no host timing comes near.
TEST_F(TorchOnDevice, TheBreakdownTimesEveryNodeWithTheDevicesClock) {
  auto allocator = test::test_memory_allocator();
  allocator->timer_seconds = 1000;
  Network net = mlp();
  auto ex = on_testmem(net);
  auto timer = std::make_shared<NodeTimer>();
  ex->add_event(timer);
  for (int call = 0; call < 2; ++call) ex->inference_and_backprop(mlp_feeds(call), "loss");
  allocator->timer_seconds = 0;
  const Breakdown b = breakdown(*timer, ex->implementations());
  EXPECT_EQ(b.nodes.size(), 8u);  // 4 nodes, both passes
  for (const auto& row : b.nodes) {
    EXPECT_EQ(row.clock, "testmem:0") << row.name << (row.pass == Pass::forward ? " forward" : " backward");
    EXPECT_EQ(row.median_seconds, 1000) << row.name;
  }
  EXPECT_EQ(b.device_timed_nodes, static_cast<int64_t>(b.nodes.size()));
}

// d5 net on a device: d5's allocator holds the parameters, their gradients and the feeds; the
// memory ATen allocates itself is the framework's, reported apart (here unavailable: the test
// device's tensors are ATen host memory, of which it keeps no statistics).
TEST_F(TorchOnDevice, DNetReportsDsAndLibTorchsDeviceMemoryApart) {
  Network net = mlp();
  NetBenchOptions o;
  o.backends = {"torch"};
  o.mode = NetMode::TrainStep;
  o.loss = "loss";
  o.device = "testmem:0";
  o.run.min_runs = 3;
  o.run.max_runs = 5;
  const auto cases = bench_network(net, o);
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_EQ(cases[0].state, CaseState::Passed) << cases[0].detail;
  auto metric = [&](const std::string& name) -> const MetricRecord& { return test::case_metric(cases[0], name); };
  const MetricRecord& ours = metric("device_peak_bytes");
  EXPECT_EQ(ours.info["device"], "testmem:0");
  EXPECT_EQ(ours.info["allocator"], "d5's");
  const double param_bytes = (32 * 16 + 32 + 10 * 32 + 10) * 4;
  EXPECT_GE(ours.samples.at(0), 2 * param_bytes);  // the parameters and their gradients at least
  const MetricRecord& framework = metric("framework_device_peak_bytes");
  EXPECT_EQ(framework.info["device"], "testmem:0");
  EXPECT_FALSE(framework.available);
  EXPECT_NE(framework.unavailable_reason.find("host memory"), std::string::npos) << framework.unavailable_reason;
  EXPECT_EQ(metric("transfers").samples, std::vector<double>{4});  // 2 feeds in, 2 outputs out
  // Executors whose tensors are all d5's register no probe.
  EXPECT_EQ(framework_memory_probe("reference"), nullptr);
  ASSERT_NE(framework_memory_probe("torch"), nullptr);
  // A GPU this build cannot reach is unavailable too, with the reason (or, where it can, read).
  const FrameworkDeviceMemory gpu = torch_backend::aten_device_memory(parse_device("cuda:0"));
  if (!no_cuda_torch_reason().empty()) {
    EXPECT_FALSE(gpu.peak_bytes.has_value());
  }
  EXPECT_TRUE(gpu.peak_bytes.has_value() || !gpu.unavailable_reason.empty());
}

TEST_F(TorchOnDevice, WhatCannotRunThereIsRefusedWithTheReason) {
  // A node only the reference runs: host code cannot read the device's memory.
  Network refused = with_refused_pool();
  try {
    on_testmem(refused);
    FAIL() << "no refusal";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("node 'pool'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("testmem:0"), std::string::npos) << e.what();
  }
  Network net = mlp();
  ExecutorOptions eo;
  eo.device = "nosuchkind:0";
  EXPECT_THROW(make_executor(net, "torch", eo), InvalidArgument);
  // A d5 device ATen has no counterpart for.
  test::test_memory_device(0, "othermem");
  eo.device = "othermem:0";
  try {
    make_executor(net, "torch", eo);
    FAIL() << "no refusal";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ATen has no device"), std::string::npos) << e.what();
  }
  // Executors that run where their backend does take no device.
  eo.device = "testmem:0";
  EXPECT_THROW(make_executor(net, "reference", eo), Unimplemented);
  // A GPU needs d5's CUDA backend and a LibTorch built with CUDA; with both, a missing GPU is
  // named. Which case applies is the build's, so each is checked where it holds.
  eo.device = "cuda:0";
  if (is_not_built_backend("cuda")) {
    EXPECT_THROW(make_executor(net, "torch", eo), NotBuilt);
    return;
  }
  const bool cuda_libtorch = c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
  try {
    auto ex = make_executor(net, "torch", eo);
    EXPECT_TRUE(cuda_libtorch) << "a LibTorch without CUDA accepted cuda:0";
    EXPECT_EQ(dynamic_cast<torch_backend::TorchExecutor&>(*ex).placement().aten, at::Device(at::kCUDA, 0));
  } catch (const NotBuilt& e) {
    EXPECT_FALSE(cuda_libtorch) << e.what();
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(cuda_libtorch) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUDA device(s)"), std::string::npos) << e.what();
  }
}


// ---- d5's math mode in ATen ---------------------------------------------------------------
TEST_F(TorchExecutorTest, TheMathModeSetsAtensSwitchesWhenAnExecutorIsMade) {
  using torch_backend::AtenMath;
  // The table in aten_math.h: TF32 only under tf32, timed algorithm choice only under fast.
  EXPECT_EQ(torch_backend::aten_math_for(F32Math::strict), (AtenMath{false, false, true, false}));
  EXPECT_EQ(torch_backend::aten_math_for(F32Math::tf32), (AtenMath{true, true, true, false}));
  EXPECT_EQ(torch_backend::aten_math_for(F32Math::fast), (AtenMath{false, false, false, true}));
  const F32Math before = f32_math();
  Network net = mlp();
  for (const F32Math mode : {F32Math::tf32, F32Math::fast, F32Math::strict}) {
    SCOPED_TRACE(to_string(mode));
    set_f32_math(mode);
    make_executor(net, "torch");
    EXPECT_EQ(torch_backend::aten_math(), torch_backend::aten_math_for(mode));
  }
  set_f32_math(before);
  torch_backend::set_aten_math(before);
}

// ---- on a GPU -----------------------------------------------------------------------------
// The placement above on cuda:0, where this build can run it. The GPU's kernels sum in other
// orders than the host's, so values are checked against the reference executor with Level 1's
// tolerances instead of bit for bit; copies are counted as on the test device.

class TorchOnCuda : public TorchExecutorTest {
 protected:
  void SetUp() override {
    if (const auto why = no_cuda_torch_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

std::unique_ptr<GraphExecutor> on_gpu(Network& net) {
  ExecutorOptions eo;
  eo.device = "cuda:0";
  return make_executor(net, "torch", eo);
}

TEST_F(TorchOnCuda, TrainingStepsValidateWithParametersAndGradientsOnTheGpu) {
  for (const bool conv : {false, true}) {
    SCOPED_TRACE(conv ? "cnn" : "mlp");
    Network net = conv ? cnn() : mlp();
    auto ex = on_gpu(net);
    const TensorMap feeds = conv ? TensorMap{{"x", random(DType::f32, Shape{4, 3, 12, 12}, "cx")},
                                             {"labels", random(DType::i64, Shape{4}, "cl", 0, 5)}}
                                 : mlp_feeds();
    expect_step_matches_reference(net, *ex, feeds, "loss");
    for (const auto& [p, g] : net.gradient()) {
      EXPECT_EQ(net.fetch_tensor(p).device().to_string(), "cuda:0") << p;
      EXPECT_EQ(net.fetch_tensor(g).device().to_string(), "cuda:0") << g;
    }
    // Steady state: the 2 feeds in, the 2 outputs out; with resident inputs and outputs, nothing.
    // Every node of both passes is timed by CUDA events on the stream ATen queues its work on.
    auto timer = std::make_shared<NodeTimer>();
    ex->add_event(timer);
    ex->inference_and_backprop(feeds, "loss");
    ex->remove_event(timer);
    EXPECT_EQ(ex->memory().transfers, 2 + 2);
    const Breakdown b = breakdown(*timer, ex->implementations());
    EXPECT_EQ(b.device_timed_nodes, static_cast<int64_t>(b.nodes.size()));
    for (const auto& row : b.nodes) {
      EXPECT_EQ(row.clock, "cuda:0") << row.name;
      EXPECT_GT(row.seconds, 0) << row.name;
    }
    // LibTorch's allocator held the activations: at least the largest one.
    const Device gpu = parse_device("cuda:0");
    torch_backend::reset_aten_device_peak(gpu);
    ex->inference_and_backprop(feeds, "loss");
    const FrameworkDeviceMemory aten = torch_backend::aten_device_memory(gpu);
    ASSERT_TRUE(aten.peak_bytes.has_value()) << aten.unavailable_reason;
    EXPECT_GE(*aten.peak_bytes, conv ? 4 * 6 * 12 * 12 * 4 : 8 * 32 * 4);
    TensorMap resident = feeds;
    for (const auto& [name, device] : ex->feed_devices("loss")) resident[name] = resident[name].to(device);
    ex->inference_and_backprop(resident, "loss");
    EXPECT_EQ(ex->memory().transfers, 0);
  }
}

TEST_F(TorchOnCuda, InferenceValidatesAgainstTheReference) {
  Network net = cnn();
  auto ex = on_gpu(net);
  expect_inference_matches_reference(net, *ex, {{"x", random(DType::f32, Shape{4, 3, 12, 12}, "cx")},
                                                {"labels", random(DType::i64, Shape{4}, "cl", 0, 5)}});
}

// The worst error of a convolution on the GPU relative to the largest reference output, under
// `mode`. 576 products per output: f32 sums stay near 1e-6 of the largest output, while operands
// rounded to TF32 (10 mantissa bits) are off by about 1e-3.
double conv_error_on_gpu(F32Math mode) {
  Network net("conv");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 64, 16, 16}});
  param(net, "w", Shape{64, 64, 3, 3});
  net.add_node({"conv", "Conv", "", Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, {"x", "w"}, {"y"}});
  net.add_output("y");
  const TensorMap feeds{{"x", random(DType::f32, Shape{2, 64, 16, 16}, "tf32x")}};
  ReferenceExecutor ref(net);
  const Tensor want = ref.inference(feeds).at("y");
  const F32Math before = f32_math();
  set_f32_math(mode);
  auto ex = on_gpu(net);
  const Tensor got = ex->inference(feeds).at("y").to(Device::cpu());
  set_f32_math(before);
  torch_backend::set_aten_math(before);
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::abs(got.get(i) - want.get(i)));
    largest = std::max(largest, std::abs(want.get(i)));
  }
  return worst / largest;
}

TEST_F(TorchOnCuda, ConvolutionsRoundToTf32OnlyUnderTf32) {
  EXPECT_LT(conv_error_on_gpu(F32Math::strict), 1e-5);
  // The same convolution with TF32 allowed is visibly rounded: the switch reaches cuDNN.
  EXPECT_GT(conv_error_on_gpu(F32Math::tf32), 1e-4);
}

}  // namespace
}  // namespace d5
