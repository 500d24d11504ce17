// An operator executor over two devices: operators of the backend "testdev" run on the
// host-memory device "testmem" (test_memory_device.h) and the rest on the host, so every
// transfer path an accelerator needs runs here. Values are checked against the reference
// executor (the same kernels: equal bit for bit) and against gradients derived by hand; transfers
// are counted against the plan's boundaries.
#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/validation.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/net_bench.h"
#include "deep500/net/operator_executor.h"
#include "../backends/backend_test_util.h"
#include "../test_memory_device.h"
#include "../test_memory_updates.h"
#include "../on_test_device.h"
#include "deep500/train/optimizer.h"
#include "executor_test_nets.h"
#include "../../support/case_metric.h"

namespace d5 {
namespace {

class ExecutorDevices : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    register_builtin_operators();
    test::register_reference_on_device("testdev", test::test_memory_device(), {"Gemm", "Relu", "Add"},
                                       "reference kernels on the tests' host-memory device");
  }
  static OperatorExecutor on_two_devices(Network& net, bool resident = false) {
    OperatorExecutorOptions o;
    o.resident_parameters = resident;
    return OperatorExecutor(net, "testdev", {"testdev", "reference"}, o);
  }
};

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.on_host() && b.on_host()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), b.get(i)) << what << " at " << i;
}

// y = Relu(p) + p, loss = ReduceSum(y): p has two consumers on the device.
Network two_consumers() {
  Network net("accumulate");
  net.feed_tensor("p", Tensor::from_values<float>(Shape{4}, {-1.5f, 0.5f, 2.0f, -0.25f}), true);
  net.add_node({"relu", "Relu", "", {}, {"p"}, {"a"}});
  net.add_node({"add", "Add", "", {}, {"a", "p"}, {"y"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
  net.add_output("loss");
  return net;
}

// The gradients a host-only training step of `net` gives, by gradient name.
std::map<std::string, Tensor> host_gradients(Network& net, const std::map<std::string, Tensor>& feeds) {
  ReferenceExecutor host(net);
  host.inference_and_backprop(feeds, "loss_value");
  std::map<std::string, Tensor> want;
  for (const auto& [param, grad] : net.gradient()) want[grad] = net.fetch_tensor(grad).clone();
  return want;
}

TEST_F(ExecutorDevices, PlanPlacesNodesAndNamesTheBoundaries) {
  Network net = test::mlp(4, 6, 8, 3);
  OperatorExecutor ex = on_two_devices(net);
  const auto layouts = ex.layouts("loss_value");
  ASSERT_EQ(layouts.size(), 4u);
  EXPECT_EQ(layouts[0].node, "fc1");
  EXPECT_EQ(layouts[0].device, "testmem:0");
  EXPECT_EQ(layouts[0].transfers, 3);  // x, W1, b1 come from the host
  EXPECT_EQ(layouts[0].outputs, std::vector<std::string>{"testmem:0/plain"});
  EXPECT_EQ(layouts[1].transfers, 0);  // relu reads fc1's output where it is
  EXPECT_EQ(layouts[2].transfers, 2);  // W2, b2
  EXPECT_EQ(layouts[3].node, "loss");
  EXPECT_EQ(layouts[3].device, "cpu");
  EXPECT_EQ(layouts[3].inputs, (std::vector<std::string>{"testmem:0/plain", "plain"}));
  EXPECT_EQ(layouts[3].transfers, 1);  // logits back to the host
  EXPECT_EQ(ex.implementations().at("fc1"), "testdev(reference)");
}

TEST_F(ExecutorDevices, InferenceEqualsTheHostOnlyRunAndCountsEachCopyOnce) {
  Network net = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(net, 3);
  ReferenceExecutor host(net);
  const Tensor want = host.inference(feeds).at("logits").clone();
  EXPECT_EQ(host.memory().transfers, 0);
  OperatorExecutor ex = on_two_devices(net);
  const Tensor got = ex.inference(feeds).at("logits");
  expect_equal(got, want, "logits");
  // x, W1, b1 to fc1; W2, b2 to fc2; logits to the caller.
  EXPECT_EQ(ex.memory().transfers, 6);
  EXPECT_EQ(ex.memory().transfer_bytes, (4 * 6 + 8 * 6 + 8 + 3 * 8 + 3 + 4 * 3) * 4);
  // Again: the same copies, nothing left over from the first call.
  ex.inference(feeds);
  EXPECT_EQ(ex.memory().transfers, 6);
}

TEST_F(ExecutorDevices, TrainingStepGradientsEqualTheHostOnlyRun) {
  Network net = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(net, 3);
  const std::map<std::string, Tensor> want = host_gradients(net, feeds);
  OperatorExecutor ex = on_two_devices(net);
  const auto out = ex.inference_and_backprop(feeds, "loss_value");
  EXPECT_TRUE(out.at("loss_value").on_host());
  for (const auto& [grad, value] : want) expect_equal(net.fetch_tensor(grad), value, grad);
  // Forward: 3 + 2 to the device, logits to the host once (for the loss and the caller).
  // Backward: the logits' gradient to the device, four parameter gradients to the host.
  EXPECT_EQ(ex.memory().transfers, 6 + 1 + 4);
}

// y = Relu(p) + p, loss = ReduceSum(y): p's gradient, 1[p > 0] + 1, is the sum of two
// contributions computed on the device; the executor adds them on the host.
TEST_F(ExecutorDevices, GradientsFromTwoDeviceConsumersAccumulate) {
  Network net = two_consumers();
  OperatorExecutor ex = on_two_devices(net);
  const auto out = ex.inference_and_backprop({}, "loss");
  EXPECT_FLOAT_EQ(static_cast<float>(out.at("loss").get(0)), 0.5f + 2.0f + (-1.5f + 0.5f + 2.0f - 0.25f));
  const Tensor g = net.fetch_tensor(net.gradient().at(0).second);
  ASSERT_TRUE(g.on_host());
  const std::vector<double> want{1, 2, 2, 1};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(g.get(i), want[static_cast<size_t>(i)]) << i;
  // Forward: p to the device once (relu and add share the copy), y to the host. Backward: y's
  // gradient to the device; the sum of p's two gradients on the host takes both there.
  EXPECT_EQ(ex.layouts("loss")[1].transfers, 1);
  EXPECT_EQ(ex.memory().transfers, 2 + 1 + 2);
}

// Resident parameters: W1, b1, W2, b2 (read on testmem only) move there at the first call and stay;
// their gradients are published there. What crosses in a steady-state step is only what must: x,
// the logits to the host loss and their gradient back.
TEST_F(ExecutorDevices, ResidentParametersMoveOnceAndOnlyBoundaryValuesCrossAfterwards) {
  Network net = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(net, 3);
  const std::map<std::string, Tensor> want = host_gradients(net, feeds);
  OperatorExecutor ex = on_two_devices(net, true);
  const auto layouts = ex.layouts("loss_value");
  EXPECT_EQ(layouts[0].inputs, (std::vector<std::string>{"plain", "testmem:0/plain", "testmem:0/plain"}));
  EXPECT_EQ(layouts[0].transfers, 1);  // x only
  EXPECT_EQ(layouts[2].transfers, 0);
  ex.inference_and_backprop(feeds, "loss_value");
  // x, the four parameters (once), the logits to the host, their gradient to the device.
  EXPECT_EQ(ex.memory().transfers, 1 + 4 + 1 + 1);
  for (const auto& [param, grad] : net.gradient()) {
    EXPECT_EQ(net.fetch_tensor(param).device(), test::test_memory_device()) << param;
    ASSERT_EQ(net.fetch_tensor(grad).device(), test::test_memory_device()) << grad;
    expect_equal(net.fetch_tensor(grad).to(Device::cpu()), want.at(grad), grad);
  }
  ex.inference_and_backprop(feeds, "loss_value");
  EXPECT_EQ(ex.memory().transfers, 1 + 1 + 1);
  // Without residence the same step copies the parameters in and their gradients out every time.
  Network again = test::mlp(4, 6, 8, 3);
  OperatorExecutor visiting = on_two_devices(again);
  visiting.inference_and_backprop(feeds, "loss_value");
  visiting.inference_and_backprop(feeds, "loss_value");
  EXPECT_EQ(visiting.memory().transfers, 1 + 4 + 1 + 1 + 4);
}

// Operators on a device with a clock are timed by it, read back after the call; the others by the
// host's. The test device's clock reads 1000 s per timing, which no host timing of this network
// comes near.
TEST_F(ExecutorDevices, TheBreakdownTimesDeviceOperatorsWithTheDeviceClock) {
  auto alloc = test::test_memory_allocator();
  alloc->timer_seconds = 1000;
  alloc->timers_made = 0;
  Network net = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(net, 3);
  OperatorExecutor ex = on_two_devices(net, true);
  auto timer = std::make_shared<NodeTimer>();
  ex.add_event(timer);
  ex.inference_and_backprop(feeds, "loss_value");
  ex.remove_event(timer);
  const int before = alloc->synchronizations;
  ex.inference_and_backprop(feeds, "loss_value");
  const int untimed = alloc->synchronizations - before;  // the executor's own (its copies wait)
  ex.add_event(timer);
  for (int call = 1; call < 3; ++call) ex.inference_and_backprop(feeds, "loss_value");
  // The end of each timed call waits for the device's work, so that it contains the device's rows.
  EXPECT_EQ(alloc->synchronizations - before - untimed, 2 * (untimed + 1));
  alloc->timer_seconds = 0;
  const Breakdown b = breakdown(*timer, ex.implementations());
  int64_t device_rows = 0;
  for (const auto& row : b.nodes) {
    const bool on_device = row.op_type == "Gemm" || row.op_type == "Relu";
    EXPECT_EQ(row.clock, on_device ? "testmem:0" : "host") << row.name;
    if (on_device) {
      ++device_rows;
      EXPECT_EQ(row.seconds, 1000) << row.name;
      EXPECT_EQ(row.median_seconds, 1000) << row.name;
    } else {
      EXPECT_LT(row.seconds, 1000) << row.name;
    }
  }
  EXPECT_EQ(device_rows, 6);  // fc1, relu, fc2, each in both passes
  EXPECT_EQ(b.device_timed_nodes, device_rows);
  EXPECT_EQ(alloc->timers_made, device_rows) << "timers are reused from call to call";
  const Breakdown back = breakdown_from_json(to_json(b));
  EXPECT_EQ(back.device_timed_nodes, device_rows);
  EXPECT_EQ(back.nodes.front().clock, "testmem:0");
  EXPECT_NE(format_breakdown(b).find("6 of " + std::to_string(b.nodes.size()) + " rows timed by their device's clock"),
            std::string::npos);
}

// d5 net on a device: the copies of a steady-state call and the device's high-water mark over one
// call are metrics of the case.
// The executor "testdev" for bench_network: testdev first, the reference after, resident parameters.
void register_testdev_executor() {
  register_executor("testdev", [](Network& net, const ExecutorOptions&) -> std::unique_ptr<GraphExecutor> {
    OperatorExecutorOptions o;
    o.resident_parameters = true;
    return std::make_unique<OperatorExecutor>(net, "testdev", std::vector<std::string>{"testdev", "reference"}, o);
  });
}

// d5 net's train-step benchmark of the MLP on the "testdev" executor.
std::vector<CaseResult> bench_mlp_on_testdev(bool resident_io) {
  register_testdev_executor();
  Network net = test::mlp(4, 6, 8, 3);
  NetBenchOptions o;
  o.backends = {"testdev"};
  o.mode = NetMode::TrainStep;
  o.loss = "loss_value";
  o.run.min_runs = 3;
  o.run.max_runs = 5;
  o.resident_io = resident_io;
  return bench_network(net, o);
}

TEST_F(ExecutorDevices, NetBenchCountsSteadyStateCopiesAndTheDevicePeak) {
  const auto cases = bench_mlp_on_testdev(false);
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_EQ(cases[0].state, CaseState::Passed) << cases[0].detail;
  auto metric = [&](const std::string& name) -> const MetricRecord& { return test::case_metric(cases[0], name); };
  // Tensors on the device in the plain layout ("testmem:0/plain") are not in a native layout.
  EXPECT_EQ(cases[0].extra["layouts"]["native_tensors"], 0);
  // x to the device, the logits back, their gradient to the device: 4x6 + 4x3 + 4x3 floats.
  EXPECT_EQ(metric("transfers").samples, std::vector<double>{3});
  EXPECT_EQ(metric("transfer_bytes").samples, std::vector<double>{4 * (24 + 12 + 12)});
  // At least the four resident parameters and their gradients, each in a block of 512 bytes or more.
  const MetricRecord& peak = metric("device_peak_bytes");
  EXPECT_EQ(peak.info["device"], "testmem:0");
  EXPECT_GE(peak.samples.at(0), 8 * 512);
  EXPECT_LE(peak.samples.at(0), static_cast<double>(test::test_memory_allocator()->stats(0).reserved_bytes));
}

// --resident-io: after validation the feed x sits on the device, where its reader runs, and the
// logits stay there; only the host loss's input and its gradient still cross.
TEST_F(ExecutorDevices, NetBenchWithResidentIoCopiesOnlyWhatCrossesInsideTheGraph) {
  const auto cases = bench_mlp_on_testdev(true);
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_EQ(cases[0].state, CaseState::Passed) << cases[0].detail;
  EXPECT_EQ(cases[0].params["resident_io"]["x"], "testmem:0");
  EXPECT_EQ(cases[0].params["resident_io"]["labels"], "cpu");
  for (const auto& m : cases[0].metrics) {
    if (m.name == "transfers") {
      EXPECT_EQ(m.samples, std::vector<double>{2});
    } else if (m.name == "transfer_bytes") {
      EXPECT_EQ(m.samples, std::vector<double>{4 * (12 + 12)});
    }
  }
}

// outputs_on_device: outputs come back where they were made; with x placed where
// feed_devices() says, the values equal a host-only run's and no feed crosses.
TEST_F(ExecutorDevices, OutputsStayOnTheirDeviceWhenAsked) {
  Network net = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(net, 3);
  Network host_net = test::mlp(4, 6, 8, 3);
  ReferenceExecutor host(host_net);
  const TensorMap want = host.inference_and_backprop(feeds, "loss_value");
  OperatorExecutor ex = on_two_devices(net, true);
  const auto devices = ex.feed_devices("loss_value");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices.at("x"), test::test_memory_device());
  EXPECT_EQ(devices.at("labels"), Device::cpu());
  auto options = ex.options();
  options.outputs_on_device = true;
  ex.set_options(options);
  TensorMap placed = feeds;
  placed["x"] = feeds.at("x").to(devices.at("x"));
  ex.inference_and_backprop(placed, "loss_value");
  const TensorMap got = ex.inference_and_backprop(placed, "loss_value");
  EXPECT_EQ(ex.memory().transfers, 2);  // the logits to the host loss, their gradient back
  ASSERT_EQ(got.at("logits").device(), test::test_memory_device());
  expect_equal(got.at("logits").to(Device::cpu()), want.at("logits"), "logits");
  ASSERT_TRUE(got.at("loss_value").on_host());
  expect_equal(got.at("loss_value"), want.at("loss_value"), "loss");
}

// A constant read only on the device (as batch normalization's running statistics are) is copied
// there once, with the plan; steady-state calls copy only the feed in and the output out.
TEST_F(ExecutorDevices, ResidentConstantsAreCopiedOnceWithThePlan) {
  Network net("constant");
  net.add_input("x", TensorDesc{DType::f32, Shape{4}});
  net.feed_tensor("c", Tensor::from_values<float>(Shape{4}, {1.0f, -2.0f, 0.5f, 4.0f}));
  net.add_node({"add", "Add", "", {}, {"x", "c"}, {"y"}});
  net.add_output("y");
  const std::map<std::string, Tensor> feeds = {{"x", Tensor::from_values<float>(Shape{4}, {1.0f, 1.0f, 1.0f, 1.0f})}};
  OperatorExecutor visiting = on_two_devices(net);
  EXPECT_EQ(visiting.layouts()[0].transfers, 2);  // x and c
  OperatorExecutor ex = on_two_devices(net, true);
  EXPECT_EQ(ex.layouts()[0].transfers, 1);  // x
  for (int call = 0; call < 2; ++call) {
    const auto out = ex.inference(feeds);
    EXPECT_EQ(ex.memory().transfers, 2) << "call " << call;  // x in, y out
    expect_equal(out.at("y"), Tensor::from_values<float>(Shape{4}, {2.0f, -1.0f, 1.5f, 5.0f}), "y");
  }
  visiting.inference(feeds);
  EXPECT_EQ(visiting.memory().transfers, 3);
}

// An optimizer then updates the parameters where they live: training on the two devices equals
// training on the host bit for bit (the same kernels), and the parameters never come back.
TEST_F(ExecutorDevices, TrainingWithResidentParametersEqualsTheHost) {
  test::updates_on_test_memory();
  Network on_host = test::mlp(4, 6, 8, 3), on_device = test::mlp(4, 6, 8, 3);
  const auto feeds = test::feeds_for(on_host, 3);
  ReferenceExecutor host(on_host);
  OperatorExecutor ex = on_two_devices(on_device, true);
  auto host_opt = make_optimizer("momentum", {{"lr", 0.1}});
  auto device_opt = make_optimizer("momentum", {{"lr", 0.1}});
  for (int step = 0; step < 5; ++step) {
    host_opt->step(host, feeds, "loss_value");
    device_opt->step(ex, feeds, "loss_value");
  }
  EXPECT_EQ(ex.memory().transfers, 3);
  for (const auto& param : on_host.get_params()) {
    ASSERT_EQ(on_device.fetch_tensor(param).device(), test::test_memory_device()) << param;
    expect_equal(on_device.fetch_tensor(param).to(Device::cpu()), on_host.fetch_tensor(param), param);
  }
}

// The two contributions to p's gradient are added on the device when it has update kernels.
TEST_F(ExecutorDevices, ResidentGradientsFromTwoDeviceConsumersAddOnTheDevice) {
  auto kernels = test::updates_on_test_memory();
  Network net = two_consumers();
  OperatorExecutor ex = on_two_devices(net, true);
  ex.inference_and_backprop({}, "loss");
  const int applies = kernels->applies;
  ex.inference_and_backprop({}, "loss");
  EXPECT_EQ(kernels->applies - applies, 1);  // the one sum
  const Tensor g = net.fetch_tensor(net.gradient().at(0).second);
  ASSERT_EQ(g.device(), test::test_memory_device());
  const Tensor h = g.to(Device::cpu());
  const std::vector<double> want{1, 2, 2, 1};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(h.get(i), want[static_cast<size_t>(i)]) << i;
  // y to the host, its gradient back; p stays, and so do its two gradients.
  EXPECT_EQ(ex.memory().transfers, 2);
}

TEST_F(ExecutorDevices, AnOperatorGivenAHostTensorRefusesIt) {
  OpSpec spec;
  spec.type = "Relu";
  spec.inputs = {TensorDesc{DType::f32, Shape{3}}};
  auto op = OpRegistry::global().create(spec, "testdev");
  const Tensor x = Tensor::from_values<float>(Shape{3}, {1, -1, 2});
  try {
    op->run_forward({&x, 1});
    FAIL() << "a host tensor was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 is on cpu but the operator runs on testmem:0"), std::string::npos)
        << e.what();
  }
}

// test_forward and test_gradient hand a device operator its inputs on its device and read
// host copies of what it returns.
TEST_F(ExecutorDevices, OperatorChecksRunOnTheDevice) {
  OpSpec spec;
  spec.type = "Gemm";
  spec.attrs = Attributes{{"transB", int64_t{1}}};
  spec.inputs = {TensorDesc{DType::f64, Shape{3, 4}}, TensorDesc{DType::f64, Shape{2, 4}},
                 TensorDesc{DType::f64, Shape{2}}};
  auto on_device = OpRegistry::global().create(spec, "testdev");
  auto on_host = OpRegistry::global().create(spec, "reference");
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < 3; ++i) inputs.push_back(test::random_tensor(spec.inputs[i], "in" + std::to_string(i)));
  const auto want = on_host->run_forward(inputs);
  EXPECT_EQ(test_forward(*on_device, inputs, want).state, CaseState::Passed);
  const GradientCheckResult g = test_gradient(*on_device, inputs);
  EXPECT_EQ(g.state, CaseState::Passed) << g.detail;
  EXPECT_GT(g.checked, 0);
  // A wrong reference still fails through the copies.
  std::vector<Tensor> wrong{want[0].clone()};
  wrong[0].set(0, wrong[0].get(0) + 1.0);
  EXPECT_EQ(test_forward(*on_device, inputs, wrong).state, CaseState::Failed);
}

// The shared operator cases' harness hands a backend on another device its inputs and upstream
// gradients there and compares host copies of what it returns (the cases of a GPU backend run
// through it).
TEST_F(ExecutorDevices, TheSharedCaseHarnessRunsADeviceBackend) {
  OpSpec add;
  add.type = "Add";
  add.inputs = {TensorDesc{DType::f32, Shape{2, 3}}, TensorDesc{DType::f32, Shape{3}}};
  test::expect_matches_reference(add, {test::random_input(add.inputs[0], "a"), test::random_input(add.inputs[1], "b")},
                                 "testdev", {0, 0});
  OpSpec relu;
  relu.type = "Relu";
  relu.inputs = {TensorDesc{DType::f64, Shape{7}}};
  test::expect_matches_reference(relu, {test::random_input(relu.inputs[0], "x")}, "testdev", {0, 0});
}

}  // namespace
}  // namespace d5
