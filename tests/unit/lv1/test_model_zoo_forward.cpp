// The model zoo's values: forward passes of the small models through the ReferenceExecutor,
// parameter initialization statistics, seeds, and operation counts.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/net/model_zoo.h"
#include "deep500/net/operator_executor.h"
#include "deep500/core/rng.h"

namespace d5 {
namespace reference {
void register_all();
}
namespace {

class ModelZooForward : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

Tensor random_input(const TensorDesc& desc, uint64_t seed) {
  Tensor t(desc);
  RngStream rng(seed, "zoo-test-input");
  for (float& v : t.span<float>()) v = rng.uniform_float();
  return t;
}

Tensor labels(int64_t batch, int64_t classes) {
  Tensor t(DType::i64, Shape{batch});
  for (int64_t i = 0; i < batch; ++i) t.data_as<int64_t>()[i] = (3 * i + 1) % classes;
  return t;
}

TensorMap run_inference(Network& net, const TensorMap& feeds) {
  ReferenceExecutor ex(net);
  return ex.inference(feeds);
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get(i))) return false;
  return true;
}

// Mean over the batch of -log softmax(logits)[label], in double.
double cross_entropy(const Tensor& logits, const Tensor& label) {
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, logits.get(i * c + j));
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits.get(i * c + j) - mx);
    total += mx + std::log(sum) - logits.get(i * c + static_cast<int64_t>(label.get(i)));
  }
  return total / static_cast<double>(n);
}

class SmallModelForward : public ModelZooForward, public ::testing::WithParamInterface<const char*> {};

// A forward pass at batch 2 gives finite logits, and the loss node computes the cross entropy
// of those logits and the labels. 1e-5 relative: the reference loss accumulates in double from
// f32 logits and rounds to f32 once.
TEST_P(SmallModelForward, FiniteLogitsAndTheirCrossEntropy) {
  ModelOptions o;
  o.batch = 2;
  o.with_loss = true;
  Network net = build_model(GetParam(), o);
  const Tensor x = random_input(net.desc(kZooInput), 1);
  const Tensor y = labels(2, net.desc(kZooLogits).shape[1]);
  auto out = run_inference(net, {{kZooInput, x}, {kZooLabels, y}});
  const Tensor& logits = out.at(kZooLogits);
  EXPECT_TRUE(all_finite(logits)) << logits.to_string();
  EXPECT_GT(compare(logits, Tensor(logits.desc()), 0, 0).max_abs_error, 0) << "logits are all zero";
  const double loss = out.at(kZooLoss).get(0);
  EXPECT_NEAR(loss, cross_entropy(logits, y), 1e-5 * std::abs(loss));
}

// Inference mode treats samples independently: each row of a batch-2 run equals that sample run
// alone. This catches a batch axis confused with a sequence or head axis (LSTM's transposes, the
// Transformer's head split). Tolerance: f32 sums over at most a few thousand terms whose order
// may change with the batch size.
TEST_P(SmallModelForward, SamplesOfABatchAreIndependent) {
  ModelOptions o;
  o.batch = 2;
  Network pair = build_model(GetParam(), o);
  const Tensor x = random_input(pair.desc(kZooInput), 2);
  const Tensor both = run_inference(pair, {{kZooInput, x}}).at(kZooLogits);
  o.batch = 1;
  Network single = build_model(GetParam(), o);
  const int64_t per_sample = x.numel() / 2, classes = both.shape()[1];
  for (int64_t s = 0; s < 2; ++s) {
    Tensor one(single.desc(kZooInput));
    std::copy_n(x.data_as<float>() + s * per_sample, per_sample, one.data_as<float>());
    const Tensor alone = run_inference(single, {{kZooInput, one}}).at(kZooLogits);
    Tensor row(alone.desc());
    std::copy_n(both.data_as<float>() + s * classes, classes, row.data_as<float>());
    const auto c = compare(row, alone, 1e-4, 1e-5);
    EXPECT_EQ(c.mismatches, 0) << "sample " << s << ": max abs error " << c.max_abs_error;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, SmallModelForward,
                         ::testing::Values("lenet5", "mlp", "resnet20", "lstm", "transformer"));

TEST_F(ModelZooForward, TrainingModeRunsWithBatchStatisticsAndDropout) {
  for (const char* model : {"resnet20", "transformer"}) {
    SCOPED_TRACE(model);
    ModelOptions o;
    o.batch = 2;
    o.training = true;
    o.with_loss = true;
    Network net = build_model(model, o);
    const Tensor y = labels(2, 10);
    auto out = run_inference(net, {{kZooInput, random_input(net.desc(kZooInput), 3)}, {kZooLabels, y}});
    EXPECT_TRUE(all_finite(out.at(kZooLogits)));
    EXPECT_NEAR(out.at(kZooLoss).get(0), cross_entropy(out.at(kZooLogits), y),
                1e-5 * out.at(kZooLoss).get(0));
  }
}

TEST_F(ModelZooForward, SeedsDecideTheParameters) {
  ModelOptions a, b;
  b.seed = a.seed + 1;
  Network n1 = build_model("lenet5", a), n2 = build_model("lenet5", a), n3 = build_model("lenet5", b);
  for (const auto& p : n1.get_params()) {
    EXPECT_EQ(compare(n1.fetch_tensor(p), n2.fetch_tensor(p), 0, 0).mismatches, 0) << p;
    EXPECT_GT(compare(n1.fetch_tensor(p), n3.fetch_tensor(p), 0, 0).mismatches, 0) << p;
  }
}

// PyTorch's Conv/Linear default: Kaiming-uniform with a = sqrt(5), i.e. U(-b, b) with
// b = 1/sqrt(fan_in), for weights and biases alike. For N draws the sample mean has standard
// deviation b/sqrt(3N) and the mean square b^2/3 a relative one of sqrt(4/5)/sqrt(N); the checks
// allow 5 of those deviations. All draws lie within the bound, and the largest of N > 1000 reaches
// 0.99 b except with probability 0.99^N < 5e-5.
void expect_uniform(const Tensor& t, double bound, const std::string& name) {
  SCOPED_TRACE(name);
  const auto n = static_cast<double>(t.numel());
  ASSERT_GT(n, 1000);
  double sum = 0, sq = 0, mx = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    sum += v;
    sq += v * v;
    mx = std::max(mx, std::abs(v));
  }
  EXPECT_LE(mx, bound);
  EXPECT_GE(mx, 0.99 * bound);
  EXPECT_LE(std::abs(sum / n), 5 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(sq / n, bound * bound / 3, 5 * std::sqrt(0.8 / n) * bound * bound / 3);
}

TEST_F(ModelZooForward, ParametersFollowPyTorchInitialization) {
  Network r = build_model("resnet18");
  expect_uniform(r.fetch_tensor("conv1.weight"), 1 / std::sqrt(3.0 * 7 * 7), "conv1.weight");
  expect_uniform(r.fetch_tensor("layer3.0.conv2.weight"), 1 / std::sqrt(256.0 * 3 * 3),
                 "layer3.0.conv2.weight");
  expect_uniform(r.fetch_tensor("layer4.0.downsample.0.weight"), 1 / std::sqrt(256.0), "downsample");
  expect_uniform(r.fetch_tensor("fc.weight"), 1 / std::sqrt(512.0), "fc.weight");
  // 1000 biases: only the bound is asserted (the moments need more draws to be tight).
  const Tensor fc_bias = r.fetch_tensor("fc.bias");
  for (int64_t i = 0; i < fc_bias.numel(); ++i) ASSERT_LE(std::abs(fc_bias.get(i)), 1 / std::sqrt(512.0));
  for (const char* bn : {"bn1", "layer2.1.bn2"}) {
    const std::string s = bn;
    for (const auto& [suffix, value] : std::vector<std::pair<std::string, double>>{
             {".weight", 1}, {".bias", 0}, {".running_mean", 0}, {".running_var", 1}}) {
      const Tensor t = r.fetch_tensor(s + suffix);
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), value) << s + suffix;
    }
  }
  Network l = build_model("lstm");
  for (const char* p : {"lstm.W", "lstm.R"}) expect_uniform(l.fetch_tensor(p), 1 / std::sqrt(128.0), p);
  Network t = build_model("transformer");
  // Linear layers on 3-D inputs store the weight [in, out]; fan_in is the first extent.
  expect_uniform(t.fetch_tensor("layers.0.linear2.weight"), 1 / std::sqrt(512.0), "linear2.weight");
  expect_uniform(t.fetch_tensor("layers.1.self_attn.q_proj.weight"), 1 / std::sqrt(128.0), "q_proj.weight");
  const Tensor gamma = t.fetch_tensor("layers.1.norm2.weight");
  for (int64_t i = 0; i < gamma.numel(); ++i) ASSERT_EQ(gamma.get(i), 1);
}

// LeNet-5's forward at batch 1, operation by operation: conv1 28x28x6 outputs x 25 MACs,
// conv2 10x10x16 x 150, fc 400x120 + 120x84 + 84x10, 2 FLOPs per MAC = 833,040; ReLUs count one
// per element (4704 + 1600 + 120 + 84) and 2x2 max pools four per output (1176 + 400) x 4.
TEST_F(ModelZooForward, ForwardFlopsAddTheOperators) {
  ModelOptions o;
  o.initialize = false;
  EXPECT_DOUBLE_EQ(forward_flops(build_model("lenet5", o)), 833'040 + 6'508 + 6'304);
  // ResNet-50: torchvision's 4.09 G multiply-adds, 8.18 GFLOPs in convolutions and the
  // classifier; normalization, ReLU, additions and pooling add a little over 1%.
  const double r50 = forward_flops(build_model("resnet50", o));
  EXPECT_GT(r50, 8.18e9);
  EXPECT_LT(r50, 8.18e9 * 1.03);
}

}  // namespace
}  // namespace d5
