// Zoo models under graph executors: they train with the ReferenceExecutor, and every other
// executor built in computes their outputs and parameter gradients as the reference does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "deep500/backends/builtin.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "deep500/core/rng.h"

namespace d5 {
namespace {

class ZooTraining : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};
class ZooBackends : public ZooTraining {};

// MobileNetV2 at CIFAR size: its default 224x224 would make the training test take a minute.
ModelOptions small_options(const std::string& model) {
  ModelOptions o;
  if (model == "mobilenet_v2") o.input_shape = {3, 32, 32};
  // Every row of a text model's embedding read (feeds_for draws ids below 7), so that its gradient
  // has no rows that are zero on every executor, which would make the comparison powerless.
  if (model.rfind("text-", 0) == 0 || model == "seq2seq-transformer") o.vocabulary = 7;
  return o;
}

TensorMap feeds_for(const Network& net, uint64_t seed) {
  Tensor x(net.desc(kZooInput));
  RngStream rng(seed, "zoo-executor-input");
  if (x.dtype() == DType::i64) {
    // A text model's token ids: every id of a small range, so rows repeat within the batch and
    // the embedding's gradient must add them up.
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<int64_t>()[i] = static_cast<int64_t>(rng.below(7));
  } else {
    for (float& v : x.span<float>()) v = rng.uniform_float();
  }
  // One label per sample, or per position for a language model, or a label sequence for a CTC
  // model (whose labels are never its blank, 0); the last position of each sample carries -100,
  // the label the loss skips (as padding does).
  Tensor y(net.desc(kZooLabels));
  const int64_t per_sample = y.shape().rank() == 2 ? y.shape()[1] : 1;
  const int64_t lowest = net.has_node(kZooLoss) && net.node(kZooLoss).op_type == "CTCLoss" ? 1 : 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data_as<int64_t>()[i] = per_sample > 1 && i % per_sample == per_sample - 1 ? -100 : lowest + i % 3;
  TensorMap feeds{{kZooInput, x}, {kZooLabels, y}};
  // A translation model's decoder ids, from the same range as the source's.
  if (std::count(net.inputs().begin(), net.inputs().end(), kZooDecoderInput) > 0) {
    Tensor d(net.desc(kZooDecoderInput));
    for (int64_t i = 0; i < d.numel(); ++i) d.data_as<int64_t>()[i] = static_cast<int64_t>(rng.below(7));
    feeds[kZooDecoderInput] = d;
  }
  // A detector's objects (the fifth row is padding): each exactly one of its anchors, two on the
  // 16x16 map and two on the 8x8 one, so that both maps' layers are positives and receive
  // gradients (boxes matched only on one map would leave the other's weights a gradient of zeros).
  if (std::count(net.inputs().begin(), net.inputs().end(), kZooBoxes) > 0) {
    Tensor boxes(net.desc(kZooBoxes));
    boxes.fill(0);
    const float objects[4][4] = {{5.875f, 4.5f, 14.125f, 15.5f},      // 16x16 map at (10, 10): 11 x 8.25
                                 {47.375f, 10.5f, 52.625f, 25.5f},    // at (50, 18): 15 x 5.25
                                 {18.625f, 15.5f, 37.375f, 40.5f},    // 8x8 map at (28, 28): 25 x 18.75
                                 {40.675f, 34.5f, 47.325f, 53.5f}};  // at (44, 44): 19 x 6.65
    const int64_t images = boxes.shape()[0], rows = boxes.shape()[1];
    for (int64_t n = 0; n < images; ++n)
      for (int64_t m = 0; m < std::min<int64_t>(rows, 4); ++m)
        for (int64_t k = 0; k < 4; ++k) boxes.data_as<float>()[(n * rows + m) * 4 + k] = objects[m][k];
    feeds[kZooBoxes] = boxes;
  }
  return feeds;
}

// Plain SGD (rate 0.05) on one fixed batch of 4, in training mode (batch statistics, dropout):
// the loss after 15 steps is below 95% of the first. Measured: LeNet-5 2.28 -> 2.02, MLP 2.30 ->
// 0.46, ResNet-20 2.22 -> 0.015, MobileNetV2 (32x32, 1000 classes) 7.13 -> 0.001, KWS DS-CNN 2.28 ->
// 1.29, Speech CTC (per target label) 24.4 -> 1.49, LSTM 2.32 -> 1.84, Transformer 2.56 -> 1.12; a
// gradient with a wrong sign or a parameter cut off from the loss stalls or raises it.
TEST_P(ZooTraining, SgdOnOneBatchLowersTheLoss) {
  ModelOptions o = small_options(GetParam());
  o.batch = 4;
  o.with_loss = true;
  o.training = true;
  Network net = build_model(GetParam(), o);
  ReferenceExecutor ex(net);
  const TensorMap feeds = feeds_for(net, 7);
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    last = ex.inference_and_backprop(feeds, kZooLoss).at(kZooLoss).get(0);
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last)) << "step " << step;
    for (const auto& [p, g] : net.gradient()) {
      Tensor w = net.fetch_tensor(p);  // shares the network's buffer: updated in place
      const Tensor grad = net.fetch_tensor(g);
      for (int64_t i = 0; i < w.numel(); ++i) w.set(i, w.get(i) - 0.05 * grad.get(i));
    }
  }
  EXPECT_LT(last, 0.95 * first) << "first loss " << first;
}

// A node an executor hands to the reference operators is compared with the reference by itself,
// so how many do is part of what the comparison means. oneDNN has no Flatten, Slice, Pad,
// Transpose, Reshape, Squeeze, ReduceMean, ReduceSum, Equal, Not, Cast, LSTM, Gather or loss
// primitive; CUDA has no CTCLoss or SsdLoss (docs/cuda.md), torch no SsdLoss; every other executor
// runs every zoo node itself.
// A change in either direction (a node newly falling back, or a new primitive) must update this
// table; a model a backend does not list has no fallbacks there.
void expect_fallbacks(GraphExecutor& ex, const std::string& model, const std::string& backend) {
  static const std::map<std::string, std::map<std::string, size_t>> expected = {
      {"onednn",
       {{"lenet5", 2},
        {"mlp", 2},
        {"resnet20", 6},
        {"mobilenet_v2", 2},
        {"kws-dscnn", 2},           // Flatten and the loss, as lenet5
        // Its two Transposes and Reshapes, the LSTM, and the loss's Transpose, Equal, Not, Cast,
        // ReduceSum and CTCLoss (LogSoftmax runs on oneDNN)
        {"speech-ctc", 11},
        {"lstm", 4},
        {"transformer", 18},
        {"text-lstm", 5},           // lstm's and the embedding's Gather
        {"text-lstm-lm", 7},        // the Gather, three Transposes (one the loss's), LSTM, Squeeze, loss
        {"text-transformer", 19},   // transformer's and the Gather
        // Six attentions (two encoder, four decoder) of 8 each as transformer's, two Gathers, the
        // loss's Transpose and loss
        {"seq2seq-transformer", 52},
        {"detector-ssd", 7}}},  // the heads' two Reshapes and Transpose each, and SsdLoss
      {"torch", {{"detector-ssd", 1}}},  // SsdLoss: no ATen function
      {"cuda", {{"speech-ctc", 1}, {"detector-ssd", 1}}}};  // CTCLoss, SsdLoss
  size_t want = 0;
  if (const auto per_backend = expected.find(backend); per_backend != expected.end())
    if (const auto m = per_backend->second.find(model); m != per_backend->second.end()) want = m->second;
  const auto fallbacks = ex.fallbacks();
  EXPECT_EQ(fallbacks.size(), want) << "nodes of " << model << " that " << backend << " hands to the reference";
  for (const auto& [node, why] : fallbacks) {
    const Node& n = ex.network().node(node);
    EXPECT_NE(why.find("no implementation of " + n.op_type), std::string::npos) << node << ": " << why;
  }
}

// Inference mode keeps the comparison deterministic across executors (no dropout masks); the
// loss still makes every parameter receive a gradient. Tolerances: Level 1's defaults for the
// operators each tensor passes through (network_tolerance).
TEST_P(ZooBackends, EveryExecutorAgreesWithTheReference) {
  std::vector<std::string> others;
  for (const auto& b : executor_backends())
    if (b != "reference") others.push_back(b);
  if (others.empty()) GTEST_SKIP() << "this build has no executor besides the reference";
  ModelOptions o = small_options(GetParam());
  o.batch = 2;
  o.with_loss = true;
  Network net = build_model(GetParam(), o);
  const TensorMap feeds = feeds_for(net, 11);
  ReferenceExecutor ref(net);
  for (const auto& backend : others) {
    SCOPED_TRACE(backend);
    auto ex = make_executor(net, backend);
    expect_fallbacks(*ex, GetParam(), backend);
    const auto fwd = test_executor(*ex, feeds, ref);
    EXPECT_EQ(fwd.state, CaseState::Passed) << fwd.detail;
    const auto bwd = test_executor_backprop(*ex, feeds, kZooLoss, ref);
    EXPECT_EQ(bwd.state, CaseState::Passed) << bwd.detail;
  }
}

// Training mode: batch statistics and Dropout's mask, which every backend draws from the
// reference's seeded stream (a backend drawing its own would fail on the logits already).
// Tensors f32 rounding moves past the element-wise tolerance are judged by the f64 oracle.
TEST(ZooTrainingMode, MobileNetV2WithDropoutAgreesWithTheReferenceOnEveryExecutor) {
  register_builtin_operators();
  ModelOptions o = small_options("mobilenet_v2");
  o.batch = 4;
  o.with_loss = true;
  o.training = true;
  Network net = build_model("mobilenet_v2", o);
  ASSERT_TRUE(std::any_of(net.nodes().begin(), net.nodes().end(), [](const Node& n) { return n.op_type == "Dropout"; }));
  const TensorMap feeds = feeds_for(net, 5);
  size_t compared = 0;
  for (const auto& backend : executor_backends()) {
    if (backend == "reference") continue;
    SCOPED_TRACE(backend);
    ReferenceExecutor ref(net);  // fresh: its Dropout mask is the stream's first, as the executor's
    auto ex = make_executor(net, backend);
    const auto bwd = test_executor_backprop(*ex, feeds, kZooLoss, ref);
    EXPECT_EQ(bwd.state, CaseState::Passed) << bwd.detail;
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "this build has no executor besides the reference";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTraining,
                         ::testing::Values("lenet5", "mlp", "resnet20", "mobilenet_v2", "kws-dscnn", "speech-ctc",
                                           "lstm", "transformer", "text-lstm", "text-lstm-lm",
                                           "seq2seq-transformer", "detector-ssd"));
// MobileNetV2's ReLU6 (Clip) often sees exactly 0 (a channel the previous ReLU6 zeroed, through a
// depthwise convolution and a batch norm whose shift starts at 0): every backend must give Clip
// the same gradient at its bounds (docs/validation.md, "Gradients at kinks").
INSTANTIATE_TEST_SUITE_P(Zoo, ZooBackends,
                         ::testing::Values("lenet5", "mlp", "resnet20", "mobilenet_v2", "kws-dscnn", "speech-ctc",
                                           "lstm", "transformer", "text-lstm", "text-lstm-lm", "text-transformer",
                                           "seq2seq-transformer", "detector-ssd"));

}  // namespace
}  // namespace d5
