// The oneDNN executor. Native layouts: tensors stay in the layouts oneDNN chose between its
// operators, with reorders only where a tensor leaves them (a reference operator, a graph output),
// and the outputs stay those of the reference executor. Gradients: no operator computes the
// gradient of an input no parameter depends on.
#include <gtest/gtest.h>

#include "../lv1/executor_test_nets.h"
#include "deep500/backends/builtin.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/executor_validation.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "backends/onednn/onednn_common.h"

namespace d5 {
namespace {

using test::add_param;
using test::random_tensor;

// x[2, 16, 12, 12] -> Conv 3x3 -> Relu -> Conv 3x3 -> MaxPool 2x2 -> y; with `tail`, y then goes
// through BatchNormalization, an Add with itself and a Flatten (no oneDNN implementation).
Network chain(bool tail) {
  Network net(tail ? "chain_tail" : "chain");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 16, 12, 12}});
  for (const char* w : {"w1", "w2"}) add_param(net, w, DType::f32, Shape{16, 16, 3, 3}, 144);
  add_param(net, "b1", DType::f32, Shape{16}, 144);
  const Attributes pad{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  net.add_node({"conv1", "Conv", "", pad, {"x", "w1", "b1"}, {"c1"}});
  net.add_node({"relu", "Relu", "", {}, {"c1"}, {"r"}});
  net.add_node({"conv2", "Conv", "", pad, {"r", "w2"}, {"c2"}});
  net.add_node({"pool",
                "MaxPool",
                "",
                Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
                {"c2"},
                {"y"}});
  if (!tail) {
    net.add_output("y");
    return net;
  }
  for (const char* p : {"bn_scale", "bn_bias", "bn_mean"}) add_param(net, p, DType::f32, Shape{16}, 4);
  Tensor var(TensorDesc{DType::f32, Shape{16}});
  var.fill(0.5);
  net.feed_tensor("bn_var", var, true);
  net.add_node({"bn", "BatchNormalization", "", {}, {"y", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"n"}});
  net.add_node({"add", "Add", "", {}, {"n", "y"}, {"s"}});
  net.add_node({"flatten", "Flatten", "", {}, {"s"}, {"f"}});
  net.add_output("f");
  return net;
}

TensorMap feeds_of(const Network& net) { return {{"x", random_tensor(net.desc("x"), "x")}}; }

std::map<std::string, NodeLayouts> by_node(const std::vector<NodeLayouts>& v) {
  std::map<std::string, NodeLayouts> m;
  for (const auto& n : v) m[n.node] = n;
  return m;
}

void expect_all_plain(const std::vector<NodeLayouts>& layouts) {
  for (const auto& n : layouts) {
    for (const auto& s : n.inputs) EXPECT_TRUE(s == "plain" || s.empty()) << n.node;
    for (const auto& s : n.outputs) EXPECT_TRUE(s == "plain" || s.empty()) << n.node;
  }
}

std::unique_ptr<OperatorExecutor> onednn_executor(Network& net, bool native_layouts) {
  OperatorExecutorOptions o;
  o.native_layouts = native_layouts;
  return std::make_unique<OperatorExecutor>(net, "onednn", std::vector<std::string>{"onednn", "reference"}, o);
}

class OnednnExecutor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

TEST_F(OnednnExecutor, ConvReluConvPoolReordersNothingBetweenOnednnOperators) {
  Network net = chain(false);
  auto ex = onednn_executor(net, true);
  auto l = by_node(ex->layouts());
  // The blocked layout the convolution chose flows through Relu and into the second convolution
  // and the pooling; only the graph output is reordered to plain.
  EXPECT_EQ(l["conv1"].outputs[0].rfind("onednn:", 0), 0u) << l["conv1"].outputs[0];
  EXPECT_EQ(l["relu"].inputs[0], l["conv1"].outputs[0]);
  EXPECT_EQ(l["relu"].outputs[0], l["conv1"].outputs[0]);
  EXPECT_EQ(l["conv2"].inputs[0], l["relu"].outputs[0]);
  EXPECT_EQ(l["pool"].inputs[0], l["conv2"].outputs[0]);
  EXPECT_EQ(l["pool"].outputs[0], "plain");
  EXPECT_EQ(l["conv1"].reorders.outputs, 0);
  for (const char* n : {"relu", "conv2"}) {
    EXPECT_EQ(l[n].reorders.inputs, 0) << n;
    EXPECT_EQ(l[n].reorders.outputs, 0) << n;
  }
  EXPECT_EQ(l["pool"].reorders.inputs, 0);
  EXPECT_EQ(l["pool"].reorders.outputs, 1);  // the graph output

  // Exchanging plain tensors instead, each convolution reorders its input and its output.
  auto plain = onednn_executor(net, false);
  expect_all_plain(plain->layouts());
  auto p = by_node(plain->layouts());
  EXPECT_EQ(p["conv1"].reorders.outputs, 1);
  EXPECT_EQ(p["conv2"].reorders.inputs, 1);

  // What runs: per inference call, plain tensors cost 3 reorders (conv1's output, conv2's input
  // and output) where native layouts cost 1 (the pooling's output), and both compute what the
  // reference executor does.
  const TensorMap feeds = feeds_of(net);
  auto reorders_per_call = [&](OperatorExecutor& e) {
    e.inference(feeds);
    const int64_t before = onednn::port_reorders_run();
    e.inference(feeds);
    return onednn::port_reorders_run() - before;
  };
  EXPECT_EQ(reorders_per_call(*plain) - reorders_per_call(*ex), 2);
  ReferenceExecutor ref(net);
  const auto r = test_executor(*ex, feeds, ref);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
}

TEST_F(OnednnExecutor, PlainLayoutWhereATensorLeavesOnednn) {
  Network net = chain(true);
  auto ex = onednn_executor(net, true);
  auto l = by_node(ex->layouts());
  // y feeds BatchNormalization and Add, both oneDNN's: it stays blocked, and so do n and s until
  // Flatten (the reference's), where Add reorders its output to plain.
  EXPECT_EQ(l["pool"].outputs[0].rfind("onednn:", 0), 0u) << l["pool"].outputs[0];
  EXPECT_EQ(l["bn"].inputs[0], l["pool"].outputs[0]);
  EXPECT_EQ(l["add"].inputs[0], l["bn"].outputs[0]);
  EXPECT_EQ(l["add"].inputs[1], l["pool"].outputs[0]);
  EXPECT_EQ(l["add"].outputs[0], "plain");
  EXPECT_EQ(l["add"].reorders.outputs, 1);
  EXPECT_EQ(l["flatten"].inputs[0], "plain");
  EXPECT_EQ(l["pool"].reorders.outputs, 0);
  ReferenceExecutor ref(net);
  const auto r = test_executor(*ex, feeds_of(net), ref);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
}

TEST_F(OnednnExecutor, TrainingStepsExchangePlainTensors) {
  Network net = chain(false);
  auto ex = onednn_executor(net, true);
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
  expect_all_plain(ex->layouts("loss"));
  ReferenceExecutor ref(net);
  const auto r = test_executor_backprop(*ex, feeds_of(net), "loss", ref);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
}

// An operator with no variant of its own (MatMul) still takes a oneDNN layout: it reorders the
// input to plain itself, and computes what it computes on plain tensors.
TEST_F(OnednnExecutor, AnOperatorWithoutVariantReordersToPlain) {
  using dnnl::memory;
  const Shape xs{2, 16, 4, 4};
  OpSpec spec;
  spec.type = "MatMul";
  spec.inputs = {TensorDesc{DType::f32, xs}, TensorDesc{DType::f32, Shape{4, 3}}};
  auto op = OpRegistry::global().create(spec, "onednn");
  const std::vector<Tensor> in = {random_tensor(spec.inputs[0], "a"), random_tensor(spec.inputs[1], "b")};
  const auto expected = op->run_forward(in);

  const memory::desc blocked({2, 16, 4, 4}, memory::data_type::f32, memory::format_tag::aBcd16b);
  const BackendLayout l = onednn::backend_layout(blocked);
  EXPECT_EQ(l.name, "aBcd16b");
  Tensor x_blocked(l.storage());
  memory from(onednn::plain(blocked.dims()), onednn::engine(), const_cast<void*>(in[0].data()));
  memory to(blocked, onednn::engine(), x_blocked.data());
  dnnl::reorder(from, to).execute(onednn::stream(), from, to);

  const auto* nl = dynamic_cast<const NativeLayoutOperator*>(op.get());
  ASSERT_NE(nl, nullptr);
  auto v = nl->with_layouts({l, std::nullopt}, {true});
  EXPECT_FALSE(dynamic_cast<const NativeLayoutOperator&>(*v).output_layout(0));  // plain output
  EXPECT_EQ(dynamic_cast<const NativeLayoutOperator&>(*v).reorders().inputs, 1);
  const auto got = v->run_forward(std::vector<Tensor>{x_blocked, in[1]});
  ASSERT_EQ(got[0].desc(), expected[0].desc());
  for (int64_t i = 0; i < got[0].numel(); ++i) ASSERT_EQ(got[0].get(i), expected[0].get(i)) << i;
}

// Records which input gradients each node's backward was given.
struct GradientsGiven : ExecutorEvent {
  std::map<std::string, std::vector<bool>> given;
  bool after_operator(const Node& n, Pass p, std::span<const Tensor> grads) override {
    if (p == Pass::backward)
      for (const auto& g : grads) given[n.name].push_back(g.defined());
    return true;
  }
};

TEST_F(OnednnExecutor, NoGradientOfAGraphInputIsComputed) {
  Network net = chain(false);
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
  auto ex = onednn_executor(net, true);
  auto events = std::make_shared<GradientsGiven>();
  ex->add_event(events);
  const TensorMap feeds = feeds_of(net);
  ex->inference_and_backprop(feeds, "loss");
  // conv1's input x is fed: its weights and bias need gradients, x does not. conv2's input r
  // depends on w1, so it gets one.
  EXPECT_EQ(events->given["conv1"], (std::vector<bool>{false, true, true}));
  EXPECT_EQ(events->given["conv2"], (std::vector<bool>{true, true}));
  ReferenceExecutor ref(net);
  const auto r = test_executor_backprop(*ex, feeds, "loss", ref);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
}

// FrameworkOverhead runs the operators the executor runs: layout variants in inference (fed the
// tensors the executor fed them, in oneDNN's layouts), the gradients the executor computes.
TEST_F(OnednnExecutor, FrameworkOverheadRunsTheSameVariants) {
  Network net = chain(false);
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
  auto ex = onednn_executor(net, true);
  RunSettings quick;
  quick.warmup_runs = 1;
  quick.min_runs = 6;
  quick.max_runs = 20;
  quick.max_seconds = 0.5;
  for (const std::string loss : {"", "loss"}) {
    SCOPED_TRACE(loss);
    const auto r = framework_overhead(*ex, feeds_of(net), loss, {}, quick);
    ASSERT_TRUE(r.ratio.summary);
    EXPECT_GT(r.ratio.summary->median, 0);
    // Its CI reaches 1 (the same primitives plus bookkeeping) unless other load made the
    // measurement untrustworthy, which it then says.
    ASSERT_TRUE(r.ratio.summary->median_ci.available);
    EXPECT_EQ(r.state == CaseState::Mistrusted, r.ratio.summary->median_ci.upper < 1) << r.mistrust_reason;
  }
}

}  // namespace
}  // namespace d5
