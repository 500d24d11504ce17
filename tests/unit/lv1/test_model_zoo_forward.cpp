// The model zoo's values: forward passes of the small models through the ReferenceExecutor,
// parameter initialization statistics, seeds, and operation counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

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

// Label sequences for a CTC model's loss, [batch, S]: classes other than the blank (0), with a
// repeat (which needs a blank between the two in every alignment), and sample i padded with -100
// after S - 3 i labels.
Tensor label_sequences(const TensorDesc& desc, int64_t classes) {
  Tensor t(desc);
  const int64_t batch = desc.shape[0], s = desc.shape[1];
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t k = 0; k < s; ++k)
      t.data_as<int64_t>()[i * s + k] = k >= s - 3 * i ? -100 : k == 1 ? 1 : 1 + (5 * k + i) % (classes - 1);
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

double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  return b == -INFINITY ? a : a + std::log1p(std::exp(b - a));
}

// CTC's loss from per-step scores [N, T, C] in double (class 0 the blank, labels padded with
// -100): per sample, -log of the summed probability of every alignment, by the forward recursion
// over the labels with blanks around and between them (a blank may be skipped only between two
// different labels); divided by the sample's label count, then averaged over the batch (torch's
// "mean").
double ctc_loss(const Tensor& scores, const Tensor& labels) {
  const int64_t n = scores.shape()[0], steps = scores.shape()[1], c = scores.shape()[2], s = labels.shape()[1];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> ext = {0};
    for (int64_t k = 0; k < s && labels.get(i * s + k) != -100; ++k)
      ext.insert(ext.end(), {static_cast<int64_t>(labels.get(i * s + k)), 0});
    const auto log_prob = [&](int64_t t, int64_t cls) {
      double sum = -INFINITY;
      for (int64_t j = 0; j < c; ++j) sum = log_add(sum, scores.get((i * steps + t) * c + j));
      return scores.get((i * steps + t) * c + cls) - sum;
    };
    const size_t width = ext.size();
    std::vector<double> alpha(width, -INFINITY);
    alpha[0] = log_prob(0, 0);
    alpha[1] = log_prob(0, ext[1]);
    for (int64_t t = 1; t < steps; ++t) {
      std::vector<double> next(width, -INFINITY);
      for (size_t j = 0; j < width; ++j) {
        double v = alpha[j];
        if (j >= 1) v = log_add(v, alpha[j - 1]);
        if (j >= 2 && ext[j] != 0 && ext[j] != ext[j - 2]) v = log_add(v, alpha[j - 2]);
        next[j] = v + log_prob(t, ext[j]);
      }
      alpha = std::move(next);
    }
    total += -log_add(alpha[width - 1], alpha[width - 2]) / static_cast<double>((width - 1) / 2);
  }
  return total / static_cast<double>(n);
}

class SmallModelForward : public ModelZooForward, public ::testing::WithParamInterface<const char*> {};

// A forward pass at batch 2 gives finite logits, and the loss node computes the cross entropy
// of those logits and the labels (CTC's loss of the label sequences, for a CTC model). 1e-5
// relative: the reference loss accumulates in double from f32 logits (f32 log-probabilities, for
// CTC) and rounds to f32 once.
TEST_P(SmallModelForward, FiniteLogitsAndTheirLoss) {
  ModelOptions o;
  o.batch = 2;
  o.with_loss = true;
  Network net = build_model(GetParam(), o);
  const Tensor x = random_input(net.desc(kZooInput), 1);
  const bool ctc = net.desc(kZooLogits).shape.rank() == 3;
  const int64_t classes = net.desc(kZooLogits).shape[ctc ? 2 : 1];
  const Tensor y = ctc ? label_sequences(net.desc(kZooLabels), classes) : labels(2, classes);
  auto out = run_inference(net, {{kZooInput, x}, {kZooLabels, y}});
  const Tensor& logits = out.at(kZooLogits);
  EXPECT_TRUE(all_finite(logits)) << logits.to_string();
  EXPECT_GT(compare(logits, Tensor(logits.desc()), 0, 0).max_abs_error, 0) << "logits are all zero";
  const double loss = out.at(kZooLoss).get(0);
  EXPECT_NEAR(loss, ctc ? ctc_loss(logits, y) : cross_entropy(logits, y), 1e-5 * std::abs(loss));
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
  const int64_t per_sample = x.numel() / 2, scores = both.numel() / 2;  // [classes] or [steps, classes]
  for (int64_t s = 0; s < 2; ++s) {
    Tensor one(single.desc(kZooInput));
    std::copy_n(x.data_as<float>() + s * per_sample, per_sample, one.data_as<float>());
    const Tensor alone = run_inference(single, {{kZooInput, one}}).at(kZooLogits);
    Tensor row(alone.desc());
    std::copy_n(both.data_as<float>() + s * scores, scores, row.data_as<float>());
    const auto c = compare(row, alone, 1e-4, 1e-5);
    EXPECT_EQ(c.mismatches, 0) << "sample " << s << ": max abs error " << c.max_abs_error;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, SmallModelForward,
                         ::testing::Values("lenet5", "mlp", "resnet20", "lstm", "transformer", "kws-dscnn",
                                           "speech-ctc"));

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
  // KWS DS-CNN on 49x10 MFCCs: every layer after the stem sees 64 x 25 x 5 = 8,000 elements. MACs:
  // stem 8,000 x 40, per block depthwise 8,000 x 9 and pointwise 8,000 x 64, fc 64 x 12; then nine
  // batch norms at 4 per element, nine ReLUs at 1, and the global pool reads each element once.
  const double kws_macs = 8'000 * 40 + 4 * (8'000 * 9 + 8'000 * 64) + 64 * 12;
  EXPECT_DOUBLE_EQ(forward_flops(build_model("kws-dscnn", o)), 2 * kws_macs + 9 * 8'000 * 5 + 8'000);
  // Speech CTC on 149x40 log-mels: conv1 writes 32 x 75 x 20 = 48,000 elements of 25 MACs, conv2
  // 24,000 of 288, each followed by a batch norm (4 per element) and a ReLU (1); the LSTM per step
  // and direction 2 x 4 x 128 x (320 + 128) for its products plus 16 per unit for the gates, over
  // 75 steps and 2 directions; fc 75 x 256 x 11 MACs and 825 additions. The transposes and
  // reshapes compute nothing.
  const double lstm_step = 2.0 * 4 * 128 * (320 + 128) + 16 * 128;
  EXPECT_DOUBLE_EQ(forward_flops(build_model("speech-ctc", o)),
                   2 * (48'000 * 25 + 24'000 * 288) + 5 * (48'000 + 24'000) + 2 * 75 * lstm_step +
                       2 * 75 * 256 * 11 + 825);
  // ResNet-50: torchvision's 4.09 G multiply-adds, 8.18 GFLOPs in convolutions and the
  // classifier; normalization, ReLU, additions and pooling add a little over 1%.
  const double r50 = forward_flops(build_model("resnet50", o));
  EXPECT_GT(r50, 8.18e9);
  EXPECT_LT(r50, 8.18e9 * 1.03);
}

}  // namespace
}  // namespace d5
