// bench_network: what `d5 net` runs, on hand-built networks.
#include <gtest/gtest.h>

#include "deep500/error.h"
#include "deep500/graph_executor.h"
#include "deep500/net_bench.h"
#include "deep500/op_registry.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

const MetricRecord* find_metric(const CaseResult& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

TEST(NetBench, EveryExecutorIsValidatedTimedAndBrokenDown) {
  register_builtin_operators();
  Network net = test::cnn(4, 3);
  NetBenchOptions o;
  o.backends = executor_backends();
  o.backends.push_back("no-such-executor");
  o.mode = NetMode::TrainStep;
  o.loss = "loss_value";
  o.breakdown = true;
  o.overhead = true;
  o.run.min_runs = 6;
  o.run.max_runs = 20;
  o.run.max_seconds = 0.5;
  const auto cases = bench_network(net, o);
  ASSERT_EQ(cases.size(), o.backends.size());
  for (size_t i = 0; i + 1 < cases.size(); ++i) {
    const CaseResult& c = cases[i];
    EXPECT_EQ(c.state, CaseState::Passed) << c.name << ": " << c.detail;
    EXPECT_EQ(c.name, "cnn/" + c.backend);
    EXPECT_EQ(c.params["batch"], 4);  // the first dimension of the first input
    for (const char* m : {"latency", "throughput", "peak_tensor_bytes", "peak_rss", "framework_overhead",
                          "executor_time", "operators_time"})
      EXPECT_TRUE(find_metric(c, m)) << c.name << " lacks " << m;
    // LibTorch's CPU allocator keeps no count of live bytes: the torch executor reports the metric
    // as unavailable (with the reason) rather than a number.
    const auto* tensor_bytes = find_metric(c, "peak_tensor_bytes");
    if (c.backend != "torch") {
      EXPECT_GT(tensor_bytes->samples.at(0), 0) << c.name;
    } else {
      EXPECT_FALSE(tensor_bytes->available);
      EXPECT_FALSE(tensor_bytes->unavailable_reason.empty());
    }
    // 8 forward nodes and 7 backward ones (Softmax's output does not reach the loss).
    EXPECT_EQ(c.extra["breakdown"]["nodes"].size(), 15u) << c.name;
    EXPECT_EQ(c.extra["implementations"].size(), net.nodes().size());
    // Operator executors report layouts; training steps exchange plain tensors only.
    if (c.backend != "torch") {
      EXPECT_EQ(c.extra["layouts"]["native_tensors"], 0) << c.name;
    }
    if (c.backend != "reference") {
      EXPECT_TRUE(c.extra.contains("validation")) << c.name;
      EXPECT_NE(c.detail.find("within tolerance"), std::string::npos) << c.detail;
    }
  }
  EXPECT_EQ(cases.back().state, CaseState::Skipped);
  EXPECT_NE(cases.back().detail.find("no executor 'no-such-executor'"), std::string::npos);
  Results r;
  r.cases = cases;
  EXPECT_EQ(results_from_json(to_json(r)).cases.size(), cases.size());
}

TEST(NetBench, TrainStepNeedsALossThatANodeComputes) {
  register_builtin_operators();
  Network net = test::mlp(2, 3, 4, 2);
  NetBenchOptions o;
  o.mode = NetMode::TrainStep;
  EXPECT_THROW(bench_network(net, o), InvalidArgument);
  o.loss = "x";
  EXPECT_THROW(bench_network(net, o), InvalidArgument);
  EXPECT_EQ(parse_net_mode("train-step"), NetMode::TrainStep);
  EXPECT_THROW(parse_net_mode("training"), InvalidArgument);
}

}  // namespace
}  // namespace d5
