// bench_network: what `d5 net` runs, on hand-built networks.
#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/net_bench.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
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
  // The executor test_executor_devices.cpp registers for its own device, when that ran first.
  std::erase(o.backends, "testdev");
  o.mode = NetMode::TrainStep;
  o.loss = "loss_value";
  o.breakdown = true;
  o.overhead = true;
  o.run.min_runs = 6;
  o.run.max_runs = 20;
  o.run.max_seconds = 0.5;
  const auto cases = bench_network(net, o);
  ASSERT_EQ(cases.size(), o.backends.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseResult& c = cases[i];
    // An operator executor's FrameworkOverhead whose CI lies below 1 (possible only under other
    // load) makes the case MISTRUSTED, saying so; anything else is PASSED.
    const auto* overhead = find_metric(c, "framework_overhead");
    ASSERT_TRUE(overhead) << c.name;
    EXPECT_EQ(overhead->info["same_operators"], c.backend != "torch") << c.name;
    // The sanity band (test_executor_metrics.cpp) where both sides run the same operators.
    if (c.backend != "torch") {
      ASSERT_TRUE(overhead->summary) << c.name;
      EXPECT_GE(overhead->summary->median, 0.9) << c.name;
    }
    if (c.state == CaseState::Mistrusted && overhead->info.contains("mistrusted")) {
      EXPECT_EQ(c.detail.rfind("FrameworkOverhead's 95% CI", 0), 0u) << c.detail;
    } else {
      EXPECT_EQ(c.state, CaseState::Passed) << c.name << ": " << c.detail;
    }
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
  Results r;
  r.cases = cases;
  EXPECT_EQ(results_from_json(to_json(r)).cases.size(), cases.size());
}

// A name deep500 does not have is a usage error, not a skipped case; a built backend without an
// executor is UNIMPLEMENTED; a backend this build left out is SKIPPED with the reason.
TEST(NetBench, UnknownUnbuiltAndExecutorlessBackendsAreToldApart) {
  register_builtin_operators();
  Network net = test::cnn(4, 3);
  NetBenchOptions o;
  o.run.min_runs = 2;
  o.run.max_runs = 2;
  o.backends = {"no-such-executor"};
  try {
    bench_network(net, o);
    FAIL() << "a misspelt backend became a case";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no backend 'no-such-executor'"), std::string::npos) << e.what();
  }
  BackendInfo noexec;
  noexec.name = "no-executor-backend";
  register_backend(noexec);
  o.backends = {"no-executor-backend"};
  auto cases = bench_network(net, o);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].state, CaseState::Unimplemented) << cases[0].detail;
  for (const std::string& name : not_built_backends()) {
    o.backends = {name};
    cases = bench_network(net, o);
    ASSERT_EQ(cases.size(), 1u);
    EXPECT_EQ(cases[0].state, CaseState::Skipped) << name;
    EXPECT_NE(cases[0].detail.find("built without the " + name + " backend"), std::string::npos) << cases[0].detail;
  }
}

// A reference executor on its own copy of the network, whose first hidden pre-activation for the
// first draw of inputs lies just below 0 where the validating reference's lies just above.
struct NetworkCopy {
  Network copy;
};
class KinkyExecutor : private NetworkCopy, public ReferenceExecutor {
 public:
  explicit KinkyExecutor(Network copy) : NetworkCopy{std::move(copy)}, ReferenceExecutor(NetworkCopy::copy) {}
};

// Inputs that put a Relu input on the two executors' different sides of 0 cannot judge the
// gradients: the validation draws other inputs, says so, and judges on those.
TEST(NetBench, AKinkCrossingInTheFirstInputsIsValidatedOnOthers) {
  register_builtin_operators();
  Network net = test::mlp(1, 4, 3, 2);
  NetBenchOptions o;
  o.mode = NetMode::TrainStep;
  o.loss = "loss_value";
  o.run.min_runs = 3;
  o.run.max_runs = 3;
  const TensorMap first = synthetic_feeds(net, o.seed);
  test::set_first_preactivation(net, first, 1e-6);
  Network kinky = net;
  test::set_first_preactivation(kinky, first, -1e-6);
  register_executor("kinky-test", [kinky](Network&, const ExecutorOptions&) -> std::unique_ptr<GraphExecutor> {
    return std::make_unique<KinkyExecutor>(kinky);
  });
  o.backends = {"kinky-test"};
  const auto cases = bench_network(net, o);
  ASSERT_EQ(cases.size(), 1u);
  const CaseResult& c = cases[0];
  EXPECT_EQ(c.state, CaseState::Passed) << c.detail;
  ASSERT_TRUE(c.extra["validation"].contains("redrawn_inputs")) << c.extra.dump();
  EXPECT_EQ(c.extra["validation"]["redrawn_inputs"]["times"], 1);
  EXPECT_NE(c.detail.find("on inputs drawn again 1 time(s): 1 Relu or Clip input element(s) lie on the other side of a kink"),
            std::string::npos)
      << c.detail;
  // Without the redraw the same inputs are MISTRUSTED (ExecutorValidation's test): the kink is real.
  ReferenceExecutor ref(net);
  KinkyExecutor ex(kinky);
  EXPECT_EQ(test_executor_backprop(ex, first, "loss_value", ref).state, CaseState::Mistrusted);
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
