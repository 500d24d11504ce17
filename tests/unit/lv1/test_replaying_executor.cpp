// ReplayingExecutor (docs/cuda-graphs.md) around an operator executor whose nodes run on the
// tests' host-memory device, with a recorder that, like a CUDA graph, runs nothing while it
// records and runs the recorded step again at every replay. Values are checked against the
// reference executor on the same feeds: a replay that read stale feeds, returned the buffers the
// next replay overwrites, or left the previous step's gradients in the network fails.
#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/net/operator_executor.h"
#include "deep500/net/replaying_executor.h"
#include "../on_test_device.h"
#include "../test_memory_device.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

struct RecorderLog {
  int records = 0, replays = 0, discards = 0;
  std::string refuse;  // record() answers this when set
};

class RerunRecorder final : public StepRecorder {
 public:
  explicit RerunRecorder(RecorderLog& log) : log_(log) {}
  std::string name() const override { return "re-running recorder (tests)"; }
  std::string record(const std::function<void()>& step) override {
    ++log_.records;
    step_ = nullptr;
    if (!log_.refuse.empty()) return log_.refuse;
    step_ = step;
    return "";
  }
  bool recorded() const override { return static_cast<bool>(step_); }
  void replay() override {
    D5_CHECK_ARG(step_, "nothing recorded");
    ++log_.replays;
    step_();
  }
  void discard() override {
    ++log_.discards;
    step_ = nullptr;
  }

 private:
  RecorderLog& log_;
  std::function<void()> step_;
};

class Replaying : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    register_builtin_operators();
    test::register_reference_on_device("graphdev", test::test_memory_device(),
                                       {"Gemm", "Relu", "SoftmaxCrossEntropyLoss"},
                                       "reference kernels on the tests' host-memory device");
    test::register_reference_on_device("halfdev", test::test_memory_device(), {"Gemm", "Relu"},
                                       "reference kernels on the tests' host-memory device, no loss");
  }
  static std::unique_ptr<ReplayingExecutor> replaying(Network& net, RecorderLog& log,
                                                      const std::string& backend = "graphdev") {
    OperatorExecutorOptions o;
    o.resident_parameters = true;
    return std::make_unique<ReplayingExecutor>(
        net, std::make_unique<OperatorExecutor>(net, backend, std::vector<std::string>{backend, "reference"}, o),
        std::make_unique<RerunRecorder>(log));
  }
};

TensorMap feeds_for(uint64_t seed) {
  Tensor x = test::random_tensor(TensorDesc{DType::f32, Shape{4, 6}}, "x" + std::to_string(seed));
  Tensor labels(TensorDesc{DType::i64, Shape{4}});
  for (int64_t i = 0; i < 4; ++i) labels.set(i, static_cast<double>((i + seed) % 3));
  return {{"x", x}, {"labels", labels}};
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.on_host()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.get(i), want.get(i)) << what << " at " << i;
}

// Same kernels in the same order: equal bit for bit.
TEST_F(Replaying, StepsAreRecordedOnceAndEveryReplayReadsItsOwnFeeds) {
  Network net = test::mlp(4, 6, 5, 3);
  Network oracle_net = net;
  ReferenceExecutor oracle(oracle_net);
  RecorderLog log;
  auto ex = replaying(net, log);
  std::vector<Tensor> kept;
  for (uint64_t call = 0; call < 4; ++call) {
    const TensorMap feeds = feeds_for(call);
    const TensorMap got = ex->inference(feeds);
    const TensorMap want = oracle.inference(feeds);
    expect_equal(got.at("logits"), want.at("logits"), "call " + std::to_string(call));
    expect_equal(net.fetch_tensor("logits"), want.at("logits"), "the network's stored output");
    kept.push_back(got.at("logits"));
  }
  const ReplayReport& r = ex->report();
  EXPECT_EQ(r.unrecorded_calls, 1);
  EXPECT_NE(r.last_unrecorded_why.find("first call"), std::string::npos) << r.last_unrecorded_why;
  EXPECT_EQ(r.recordings, 1);
  EXPECT_EQ(r.replays, 3);
  EXPECT_EQ(log.records, 1);
  EXPECT_EQ(log.replays, 3);
  // What the caller kept from earlier calls is its own copy.
  expect_equal(kept[1], oracle.inference(feeds_for(1)).at("logits"), "the output of call 1, after call 3");
  EXPECT_EQ(ex->memory().transfers, 2) << "x in, logits out (inference does not read the labels)";

  // Feeds already on the device (d5 net --resident-io) are the same step kind: copied into the
  // recorded buffers without the host, and replayed.
  TensorMap on_device = feeds_for(4);
  on_device["x"] = on_device.at("x").to(test::test_memory_device());
  expect_equal(ex->inference(on_device).at("logits"), oracle.inference(feeds_for(4)).at("logits"), "device feeds");
  EXPECT_EQ(r.recordings, 1);
  EXPECT_EQ(r.replays, 4);
  EXPECT_EQ(ex->memory().transfers, 1) << "only the logits out";
}

TEST_F(Replaying, EachReplayPublishesItsOwnGradients) {
  Network net = test::mlp(4, 6, 5, 3);
  Network oracle_net = net;
  ReferenceExecutor oracle(oracle_net);
  RecorderLog log;
  auto ex = replaying(net, log);
  for (uint64_t call = 0; call < 3; ++call) {
    const TensorMap feeds = feeds_for(10 + call);
    ex->inference_and_backprop(feeds, "loss_value");
    oracle.inference_and_backprop(feeds, "loss_value");
    for (const auto& [param, gradient] : net.gradient()) {
      const Tensor g = net.fetch_tensor(gradient);
      EXPECT_FALSE(g.on_host()) << gradient << " stays beside its parameter";
      expect_equal(g.to(Device::cpu()), oracle_net.fetch_tensor(gradient), gradient + " at call " + std::to_string(call));
    }
  }
  EXPECT_EQ(ex->report().replays, 2);

  // A replay that fails (a class index out of range) throws as the step without it does, and the
  // next replay serves again.
  TensorMap bad = feeds_for(20);
  bad.at("labels").set(2, 7.0);
  EXPECT_THROW(ex->inference_and_backprop(bad, "loss_value"), InvalidArgument);
  EXPECT_THROW(oracle.inference_and_backprop(bad, "loss_value"), InvalidArgument);
  EXPECT_EQ(ex->report().replays, 3);
  const TensorMap good = feeds_for(21);
  ex->inference_and_backprop(good, "loss_value");
  oracle.inference_and_backprop(good, "loss_value");
  for (const auto& [param, gradient] : net.gradient())
    expect_equal(net.fetch_tensor(gradient).to(Device::cpu()), oracle_net.fetch_tensor(gradient), gradient + " after");
  EXPECT_EQ(ex->report().replays, 4);
}

// Loading other weights replaces the parameter tensors: the recording read the old ones.
TEST_F(Replaying, AReplacedParameterIsRecordedAgain) {
  Network net = test::mlp(4, 6, 5, 3);
  RecorderLog log;
  auto ex = replaying(net, log);
  for (uint64_t call = 0; call < 3; ++call) ex->inference(feeds_for(call));
  EXPECT_EQ(log.records, 1);
  Tensor w = test::random_tensor(net.desc("W1"), "other W1");
  net.feed_tensor("W1", w);
  Network oracle_net = net;
  ReferenceExecutor oracle(oracle_net);
  for (uint64_t call = 3; call < 6; ++call)
    expect_equal(ex->inference(feeds_for(call)).at("logits"), oracle.inference(feeds_for(call)).at("logits"),
                 "after W1 was replaced, call " + std::to_string(call));
  EXPECT_EQ(log.records, 2);
  EXPECT_EQ(ex->report().unrecorded_calls, 2) << "the call after the replacement moves W1 to the device";
}

TEST_F(Replaying, WhatCannotBeRecordedRunsTheExecutorAndSaysWhy) {
  Network net = test::mlp(4, 6, 5, 3);
  Network oracle_net = net;
  ReferenceExecutor oracle(oracle_net);
  RecorderLog log;
  log.refuse = "cudaMemcpy: operation not permitted when stream is capturing";
  auto ex = replaying(net, log);
  for (uint64_t call = 0; call < 3; ++call)
    expect_equal(ex->inference(feeds_for(call)).at("logits"), oracle.inference(feeds_for(call)).at("logits"),
                 "refused, call " + std::to_string(call));
  EXPECT_EQ(log.records, 1) << "a refusal is remembered for the step kind";
  EXPECT_EQ(ex->report().replays, 0);
  EXPECT_EQ(ex->report().last_unrecorded_why, log.refuse);

  // A node on the host: the recorder is not asked.
  RecorderLog host_log;
  auto host = replaying(net, host_log, "halfdev");
  for (uint64_t call = 0; call < 3; ++call) host->inference_and_backprop(feeds_for(call), "loss_value");
  EXPECT_EQ(host_log.records, 0);
  EXPECT_NE(host->report().last_unrecorded_why.find("node 'loss' runs on the host"), std::string::npos)
      << host->report().last_unrecorded_why;

  // Events are called per operator, which a replay cannot do.
  struct Count : ExecutorEvent {
    int operators = 0;
    bool before_operator(const Node&, Pass, std::span<const Tensor>) override { return ++operators > 0; }
  };
  auto count = std::make_shared<Count>();
  ex = replaying(net, log = RecorderLog{});
  ex->add_event(count);
  for (uint64_t call = 0; call < 3; ++call) ex->inference(feeds_for(call));
  EXPECT_EQ(count->operators, 9);
  EXPECT_EQ(log.records, 0);
  EXPECT_NE(ex->report().last_unrecorded_why.find("events are attached"), std::string::npos);
}

TEST_F(Replaying, OnlyExecutorsWithARecorderTakeCudaGraphs) {
  Network net = test::mlp(4, 6, 5, 3);
  ExecutorOptions o;
  o.cuda_graphs = true;
  try {
    make_executor(net, "reference", o);
    FAIL() << "the reference executor took --cuda-graphs";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("only the cuda executor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d5
