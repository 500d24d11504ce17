// Integration tests of `d5 train`: the real binary on real MNIST images.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

class CliTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist << " (CI places ../shared beside the checkout)";
  }
  std::string path(const std::string& name) const { return dir_.file(name); }

  // LeNet-5 with Adam on 256 real images in order, tested on 100 others, with the default thread
  // count: per-thread partial sums are reduced in a fixed order, so several threads are as
  // reproducible as one.
  std::vector<std::string> lenet_args(const std::vector<std::string>& more) const {
    std::vector<std::string> a = {"train",         "--model",      "lenet5",      "--dataset",    "mnist",
                                  "--data-dir",    kMnist,         "--train-split", "test",       "--train-range",
                                  "0:256",         "--test-split", "test",        "--test-range", "8000:8100",
                                  "--optimizer",   "adam",     "--lr",        "0.003",
                                  "--batch",      "32",          "--sampler",    "ordered"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  TempDir dir_{"d5-train"};
};

// The arguments with the value of `flag` replaced.
std::vector<std::string> with(std::vector<std::string> args, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) args[i + 1] = value;
  }
  return args;
}

// --save-model writes ONNX: a build without ONNX support ends such a run "not built" (exit 6).
#define SKIP_IF_NO_ONNX(r) \
  if ((r).exit_code == kExitNotBuilt) GTEST_SKIP() << "this build has no ONNX support (--save-model): " << (r).err

const nlohmann::json* find_metric(const nlohmann::json& c, const std::string& name) {
  for (const auto& m : c["metrics"]) {
    if (m["name"] == name) return &m;
  }
  return nullptr;
}

TEST_F(CliTrain, ReportsCurvesThroughputAndAccuracyAsJson) {
  const auto r = run_d5(lenet_args({"--steps", "24", "--format", "json", "-o", path("r.json")}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_EQ(j["schema"], "deep500.results");
  EXPECT_EQ(j["manifest"]["extra"]["dataset"]["train"]["samples"], 256);
  EXPECT_EQ(j["manifest"]["extra"]["dataset"]["test"]["samples"], 100);
  ASSERT_EQ(j["cases"].size(), 1u);
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["state"], "PASSED") << c["detail"];
  EXPECT_EQ(c["level"], "L2");
  EXPECT_EQ(c["extra"]["steps"], 24);
  EXPECT_EQ(c["extra"]["stop_reason"], "steps");
  EXPECT_EQ(c["extra"]["epochs_completed"], 3);  // 8 batches of 32 per epoch
  EXPECT_EQ(c["params"]["hyperparameters"]["lr"], 0.003);
  EXPECT_EQ(c["params"]["hyperparameters"]["beta2"], 0.999);  // torch's default, not given
  const auto* step = find_metric(c, "step_time");
  ASSERT_TRUE(step);
  EXPECT_EQ((*step)["samples"].size(), 24u);
  EXPECT_TRUE(find_metric(c, "throughput"));
  const auto* acc = find_metric(c, "test_accuracy");
  ASSERT_TRUE(acc);
  EXPECT_EQ((*acc)["samples"].size(), 3u);  // after each epoch; the last one is the end
  // 24 steps of Adam on real digits: well above chance (0.1; this setting gives about 0.44).
  EXPECT_GT(c["extra"]["final_test_accuracy"].get<double>(), 0.3);
  EXPECT_EQ(c["extra"]["curves"]["loss"].size(), 24u);
}

TEST_F(CliTrain, OrderedRunsAreBitwiseReproducible) {
  for (const char* out : {"a.onnx", "b.onnx"}) {
    const auto r = run_d5(lenet_args({"--steps", "6", "--no-test", "--save-model", path(out)}));
    SKIP_IF_NO_ONNX(r);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  }
  const std::string a = read_file(path("a.onnx")), b = read_file(path("b.onnx"));
  ASSERT_GT(a.size(), 61706u * 4);  // the parameters are in it
  EXPECT_TRUE(a == b) << "two identical runs saved different models";
}

// 10 steps, or 4 steps, a checkpoint, and 6 more in a new process: the same model, byte for byte.
TEST_F(CliTrain, ResumedRunEqualsTheUninterruptedOne) {
  auto r = run_d5(lenet_args({"--steps", "10", "--no-test", "--save-model", path("whole.onnx")}));
  SKIP_IF_NO_ONNX(r);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  r = run_d5(lenet_args({"--steps", "4", "--no-test", "--checkpoint", path("ck")}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  r = run_d5(lenet_args({"--steps", "10", "--no-test", "--resume", path("ck"), "--save-model", path("resumed.onnx")}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(read_file(path("whole.onnx")) == read_file(path("resumed.onnx")));
  // A different run shape cannot resume it.
  r = run_d5(with(lenet_args({"--steps", "10", "--no-test", "--resume", path("ck")}), "--batch", "16"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("batch size"), std::string::npos) << r.err;
}

// SIGINT in the middle of a run: the step in progress completes, the checkpoint and the results
// are written, d5 exits with 130 (128 + SIGINT) and says where it stopped; resuming from that
// checkpoint gives the model of a run never interrupted, byte for byte.
TEST_F(CliTrain, SigintSavesTheCheckpointAndTheResumedRunEqualsTheUninterruptedOne) {
  const std::string ck = path("ck"), result = path("interrupted.json");
  // A checkpoint every 2 steps tells that training has begun; the run is far too long to end first.
  const StartedProcess p = start_process(
      d5_binary(), lenet_args({"--steps", "100000", "--no-test", "--checkpoint", ck, "--checkpoint-every", "2",
                               "--format", "json", "-o", result}));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(ck) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(ck)) << "no checkpoint within 120 s";
  kill(p.pid, SIGINT);
  const ProcessResult r = wait_process(p);
  ASSERT_EQ(r.signal, 0) << "d5 died of signal " << r.signal << ": " << r.err;
  ASSERT_EQ(r.exit_code, 130) << r.err;
  const std::regex said("SIGINT stopped training after step ([0-9]+); results written, resume with --resume");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, said)) << r.err;
  const int64_t stopped = std::stoll(m[1]);
  const auto j = nlohmann::json::parse(read_file(result));
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["extra"]["stop_reason"], "interrupted") << c.dump();
  EXPECT_EQ(c["extra"]["steps"], stopped) << c.dump();

  const std::string steps = std::to_string(stopped + 3);
  auto whole = run_d5(lenet_args({"--steps", steps, "--no-test", "--save-model", path("whole.onnx")}));
  SKIP_IF_NO_ONNX(whole);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto resumed = run_d5(lenet_args({"--steps", steps, "--no-test", "--resume", ck, "--save-model", path("resumed.onnx")}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(read_file(path("whole.onnx")) == read_file(path("resumed.onnx")));
}

TEST_F(CliTrain, TrainsAClassifierFromAnOnnxFile) {
  auto r = run_d5({"models", "export", "lenet5", "--batch", "32", "-o", path("lenet.onnx")});
  if (r.exit_code == kExitNotBuilt) GTEST_SKIP() << "built without ONNX support";
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  r = run_d5(with(lenet_args({"--steps", "8", "--format", "json"}), "--model", path("lenet.onnx")));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["manifest"]["extra"]["source"], "onnx:" + path("lenet.onnx"));
  EXPECT_EQ(j["cases"][0]["extra"]["steps"], 8);
  const auto& loss = j["cases"][0]["extra"]["curves"]["loss"];
  EXPECT_LT(loss.back()["value"].get<double>(), loss.front()["value"].get<double>());
}

TEST_F(CliTrain, MissedTargetFailsAndBadUsageIsRefused) {
  auto r = run_d5(lenet_args({"--steps", "2", "--target-accuracy", "1.0"}));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  r = run_d5(with(lenet_args({"--steps", "2"}), "--optimizer", "no-such-optimizer"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no-such-optimizer"), std::string::npos) << r.err;
  r = run_d5(with(lenet_args({"--steps", "2"}), "--dataset", "no-such-format"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no-such-format"), std::string::npos) << r.err;
  r = run_d5(lenet_args({"--steps", "2", "--epochs", "1"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_d5(lenet_args({"--steps", "2", "--resume", path("missing-checkpoint")}));
  EXPECT_EQ(r.exit_code, 4) << r.err;
  // CUDA graphs are the cuda executor's (docs/cuda-graphs.md).
  r = run_d5(lenet_args({"--steps", "2", "--cuda-graphs"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("only the cuda executor"), std::string::npos) << r.err;
}

}  // namespace

}  // namespace d5::test
