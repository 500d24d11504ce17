// `d5 train` beyond classification through the real binary: a token classifier from an ONNX file
// on npy token labels with padding (--loss sequence-ce, perplexity target), a regressor on npy
// values (--loss mse), and the refusals of loss heads, labels and targets that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/rng.h"
#include "deep500/net/network.h"
#include "deep500/onnx/onnx_export.h"
#include "deep500/train/dataset_formats.h"
#include "process.h"

namespace d5::test {

namespace {

constexpr int64_t kBatch = 8, kSamples = 84, kPositions = 5, kFeatures = 4, kClasses = 3;

// input [B, T, F] -> MatMul W [F, C] -> Add b [C] -> logits [B, T, C], or [B, F] -> [B, 1] for a regressor.
void write_linear_model(const std::string& path, const Shape& input, int64_t outputs, uint64_t seed) {
  Network net("linear");
  RngStream rng(seed, "linear-model");
  net.add_input("input", TensorDesc{DType::f32, input});
  Tensor w(DType::f32, Shape{input[input.rank() - 1], outputs});
  for (int64_t i = 0; i < w.numel(); ++i) w.data_as<float>()[i] = static_cast<float>(0.1 * rng.normal());
  net.feed_tensor("W", w, true);
  net.feed_tensor("b", Tensor(DType::f32, Shape{outputs}), true);
  net.add_node({"mm", "MatMul", "", {}, {"input", "W"}, {"h"}});
  net.add_node({"add", "Add", "", {}, {"h", "b"}, {"logits"}});
  net.add_output("logits");
  export_onnx_file(net, path);
}

// Token features a noisy one-hot of their class; sample i has 2 + i % 4 real tokens, then padding.
void write_token_set(const std::string& dir) {
  RngStream rng(3, "token-set");
  Tensor x(DType::f32, Shape{kSamples, kPositions, kFeatures});
  Tensor y(DType::i64, Shape{kSamples, kPositions});
  for (int64_t i = 0; i < kSamples * kPositions; ++i) {
    const bool real = i % kPositions < 2 + (i / kPositions) % 4;
    const auto label = static_cast<int64_t>(rng.below(kClasses));
    y.data_as<int64_t>()[i] = real ? label : -100;
    for (int64_t f = 0; f < kFeatures; ++f)
      x.data_as<float>()[i * kFeatures + f] = real ? static_cast<float>((f == label ? 2.0 : 0.0) + 0.3 * rng.normal()) : 0.f;
  }
  std::filesystem::create_directories(dir);
  write_npy_file(dir + "/inputs.npy", x);
  write_npy_file(dir + "/labels.npy", y);
}

// y = x . (1, -2, 0.5) + 0.25, stored as f64 [N, 1].
void write_line_set(const std::string& dir) {
  RngStream rng(4, "line-set");
  Tensor x(DType::f32, Shape{kSamples, 3});
  Tensor y(DType::f64, Shape{kSamples, 1});
  for (int64_t i = 0; i < kSamples; ++i) {
    float* r = x.data_as<float>() + i * 3;
    for (int64_t f = 0; f < 3; ++f) r[f] = static_cast<float>(rng.normal());
    y.data_as<double>()[i] = r[0] - 2.0 * r[1] + 0.5 * r[2] + 0.25;
  }
  std::filesystem::create_directories(dir);
  write_npy_file(dir + "/inputs.npy", x);
  write_npy_file(dir + "/labels.npy", y);
}

class CliTrainQuality : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }  // the exporter checks every node
  void SetUp() override {
    write_linear_model(path("tokens.onnx"), Shape{kBatch, kPositions, kFeatures}, kClasses, 5);
    write_token_set(path("tokens"));
    write_linear_model(path("line.onnx"), Shape{kBatch, 3}, 1, 6);
    write_line_set(path("line"));
  }
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::vector<std::string> args(const std::string& model, const std::string& data, const std::string& labels,
                                const std::vector<std::string>& more) const {
    std::vector<std::string> a = {"train",         "--model",      path(model),  "--dataset",    "npy",
                                  "--data-dir",    path(data),     "--set",      "labels=" + labels,
                                  "--train-range", "0:64",         "--test-range", "64:84", "--batch", "8",
                                  "--sampler",     "ordered",      "--format",   "json"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  TempDir dir_{"d5-train-quality"};
};

const nlohmann::json* metric(const nlohmann::json& c, const std::string& name) {
  for (const auto& m : c["metrics"])
    if (m["name"] == name) return &m;
  return nullptr;
}

TEST_F(CliTrainQuality, TrainsATokenClassifierToAPerplexityTarget) {
  const auto r = run_d5(args("tokens.onnx", "tokens", "tokens",
                             {"--loss", "sequence-ce", "--quality", "accuracy,perplexity,exact_match", "--target",
                              "perplexity<=1.3", "--lr", "0.5", "--epochs", "60", "--test-every-steps", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto c = nlohmann::json::parse(r.out)["cases"][0];
  EXPECT_EQ(c["state"], "PASSED") << c["detail"];
  EXPECT_EQ(c["params"]["loss_head"], "sequence-ce");
  EXPECT_EQ(c["params"]["target"], "perplexity<=1.3");
  EXPECT_EQ(c["extra"]["stop_reason"], "target");
  EXPECT_LE(c["extra"]["final_test_perplexity"].get<double>(), 1.3);
  EXPECT_GE(c["extra"]["final_test_perplexity"].get<double>(), 1.0);
  EXPECT_GT(c["extra"]["final_test_accuracy"].get<double>(), 0.9);
  EXPECT_TRUE(c["extra"].contains("final_test_exact_match"));
  ASSERT_NE(metric(c, "time_to_target"), nullptr);
  const auto& curve = c["extra"]["curves"]["test_perplexity"];
  ASSERT_GE(curve.size(), 2u);
  EXPECT_GT(curve.front()["value"].get<double>(), 1.3);
}

TEST_F(CliTrainQuality, TrainsARegressorToAnMseTarget) {
  const auto r = run_d5(args("line.onnx", "line", "values",
                             {"--loss", "mse", "--target", "mse<=0.001", "--lr", "0.1", "--epochs", "100"}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto c = nlohmann::json::parse(r.out)["cases"][0];
  EXPECT_EQ(c["state"], "PASSED") << c["detail"];
  EXPECT_LE(c["extra"]["final_test_mse"].get<double>(), 0.001);
  EXPECT_EQ(metric(c, "test_accuracy"), nullptr);  // the mse head measures mse only
  EXPECT_EQ(metric(c, "training_accuracy"), nullptr);
}

TEST_F(CliTrainQuality, RefusesHeadsLabelsAndTargetsThatDoNotFit) {
  // The tokens' logits are [B, T, C]: not what softmax-ce reads.
  auto r = run_d5(args("tokens.onnx", "tokens", "tokens", {"--steps", "2"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("softmax-ce head needs f32 logits [batch, classes]"), std::string::npos) << r.err;
  // Token labels under an mse head.
  r = run_d5(args("tokens.onnx", "tokens", "tokens", {"--steps", "2", "--loss", "mse"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("pick the loss head that reads these labels"), std::string::npos) << r.err;
  // A target that points the wrong way, one that cannot be met, an unknown measure.
  r = run_d5(args("tokens.onnx", "tokens", "tokens", {"--loss", "sequence-ce", "--target", "perplexity>=4"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("perplexity is better when lower; write perplexity<=4"), std::string::npos) << r.err;
  r = run_d5(args("tokens.onnx", "tokens", "tokens", {"--loss", "sequence-ce", "--target", "accuracy>=1.5"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("can never be met"), std::string::npos) << r.err;
  r = run_d5(args("tokens.onnx", "tokens", "tokens", {"--loss", "sequence-ce", "--steps", "2", "--quality", "wer"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown quality measure 'wer'"), std::string::npos) << r.err;
  // --target and --target-accuracy say the same thing twice.
  r = run_d5(args("line.onnx", "line", "values",
                  {"--loss", "mse", "--target", "mse<=1", "--target-accuracy", "0.5", "--steps", "2"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // Regression values are no class labels for a sampler that would need them, nor padding for classes.
  r = run_d5(args("line.onnx", "line", "classes", {"--loss", "mse", "--steps", "2"}));
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("class and token labels must be integers"), std::string::npos) << r.err;
}

}  // namespace

}  // namespace d5::test
