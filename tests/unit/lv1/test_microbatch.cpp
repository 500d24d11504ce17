#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "deep500/core/error.h"
#include "deep500/net/microbatch.h"
#include "deep500/net/network.h"
#include "deep500/net/operator_executor.h"
#include "deep500/op/op_registry.h"
#include "deep500/core/rng.h"

namespace d5 {
namespace reference {
void register_all();
}
namespace {

class Microbatch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

Tensor random_f32(const Shape& s, uint64_t stream) {
  Tensor t(DType::f32, s);
  RngStream rng(7, "microbatch-test-" + std::to_string(stream));
  for (auto& v : t.span<float>()) v = rng.uniform_float() - 0.5f;
  return t;
}

// x [8, 16, 12, 12] -> Conv 3x3 pad 1 (32 filters, bias) -> Relu -> y
Network conv_net(int opset = 17) {
  Network net("conv", opset);
  net.add_input("x", TensorDesc{DType::f32, Shape{8, 16, 12, 12}});
  net.feed_tensor("W", random_f32(Shape{32, 16, 3, 3}, 1), true);
  net.feed_tensor("B", random_f32(Shape{32}, 2), true);
  net.add_node({"conv", "Conv", "", Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, {"x", "W", "B"}, {"c"}});
  net.add_node({"relu", "Relu", "", {}, {"c"}, {"y"}});
  net.add_output("y");
  return net;
}

// Evaluates the network node by node on reference operators: independent of any executor.
Tensor evaluate(const Network& net, const Tensor& x) {
  std::map<std::string, Tensor> values{{"x", x}};
  for (const auto& name : net.initializers()) values[name] = net.fetch_tensor(name);
  for (const Node* n : net.topological_order()) {
    auto op = OpRegistry::global().create(net.spec(n->name), "reference");
    std::vector<Tensor> in;
    for (const auto& i : n->inputs) in.push_back(i.empty() ? Tensor() : values.at(i));
    auto out = op->run_forward(in);
    for (size_t j = 0; j < n->outputs.size(); ++j) values[n->outputs[j]] = out[j];
  }
  return values.at(net.outputs()[0]);
}

TEST_F(Microbatch, OptimalPartitionMatchesBruteForce) {
  // Sub-linear and super-linear costs mixed, so the optimum is neither "one call" nor "all ones".
  const std::vector<std::pair<int64_t, double>> times = {{1, 1.0}, {2, 1.7}, {4, 3.9}, {3, 2.4}, {7, 9.0}};
  for (int64_t n = 1; n <= 12; ++n) {
    // Brute force: every sequence of sizes summing to n (memoized over the remainder).
    std::function<double(int64_t)> best = [&](int64_t m) -> double {
      if (m == 0) return 0;
      double b = 1e300;
      for (const auto& [s, t] : times)
        if (s <= m) b = std::min(b, t + best(m - s));
      return b;
    };
    const auto part = optimal_partition(n, times);
    ASSERT_EQ(std::accumulate(part.begin(), part.end(), int64_t{0}), n);
    double total = 0;
    for (int64_t s : part)
      for (const auto& [size, t] : times)
        if (size == s) total += t;
    EXPECT_NEAR(total, best(n), 1e-12) << "n = " << n;
  }
  EXPECT_TRUE(optimal_partition(5, {{2, 1.0}}).empty());  // no way to sum to an odd batch
  EXPECT_EQ(optimal_partition(6, {{2, 1.0}, {6, 3.5}}), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(optimal_partition(6, {{2, 1.0}, {6, 2.5}}), (std::vector<int64_t>{6}));
}

TEST_F(Microbatch, PlanRespectsTheLimitAndTheRewriteKeepsOutputs) {
  Network net = conv_net();
  // The batched algorithm's workspace is (K + M) * N * P floats, K = 16 * 9, M = 32, P = 144:
  // this limit fits it for 2 images but not for 4 or 8.
  const int64_t per_image = (16 * 9 + 32) * 144 * 4;
  MicrobatchOptions o;
  o.workspace_limit = 2 * per_image;
  o.seconds_per_size = 0.02;
  o.min_runs = 3;
  const MicrobatchPlan plan = plan_microbatches(net, o);
  ASSERT_EQ(plan.convs.size(), 1u);
  const auto& p = plan.convs[0];
  EXPECT_EQ(p.batch, 8);
  EXPECT_EQ(std::accumulate(p.micro_batches.begin(), p.micro_batches.end(), int64_t{0}), 8);
  ASSERT_EQ(p.candidates.size(), 4u);  // 1, 2, 4, 8
  for (const auto& c : p.candidates) {
    EXPECT_LE(c.workspace_bytes, o.workspace_limit) << c.batch;
    EXPECT_GT(c.median_s, 0);
    // Batched where it fits (2 images), per image elsewhere.
    EXPECT_EQ(c.implementation, c.batch == 2 ? "reference:batched-im2col" : "reference") << c.batch;
  }
  EXPECT_LE(p.workspace_after, o.workspace_limit);
  EXPECT_LE(p.time_after_s, p.time_before_s + 1e-15);  // the whole batch is one of the candidates

  // Force a split whatever the timings said, and check the rewrite computes the same outputs.
  MicrobatchPlan forced = plan;
  forced.convs[0].micro_batches = {4, 2, 2};
  const Tensor x = random_f32(Shape{8, 16, 12, 12}, 3);
  const Tensor before = evaluate(net, x);
  EXPECT_EQ(apply_microbatches(net, forced), 1);
  EXPECT_FALSE(net.has_node("conv"));
  int convs = 0;
  for (const auto& n : net.nodes()) convs += n.op_type == "Conv";
  EXPECT_EQ(convs, 3);
  EXPECT_EQ(net.desc("y").shape, (Shape{8, 32, 12, 12}));
  const Tensor after = evaluate(net, x);
  const auto cmp = compare(after, before, 0, 0);
  // Same kernels on the same images: the rewrite changes no arithmetic, only where it happens.
  EXPECT_EQ(cmp.max_abs_error, 0.0);
}

TEST_F(Microbatch, OldOpsetsGetTheSplitAttribute) {
  Network net = conv_net(11);
  MicrobatchPlan plan;
  plan.convs.push_back({});
  plan.convs[0].node = "conv";
  plan.convs[0].batch = 8;
  plan.convs[0].micro_batches = {5, 3};
  const Tensor x = random_f32(Shape{8, 16, 12, 12}, 4);
  const Tensor before = evaluate(net, x);
  apply_microbatches(net, plan);
  const Node* split = net.producer("x_mb0");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->attrs.get_ints("split"), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(compare(evaluate(net, x), before, 0, 0).max_abs_error, 0.0);
}

TEST_F(Microbatch, LimitBelowOneImageIsAnErrorNamingTheNode) {
  Network net = conv_net();
  MicrobatchOptions o;
  o.workspace_limit = 64;
  o.seconds_per_size = 0.01;
  try {
    plan_microbatches(net, o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Conv 'conv'"), std::string::npos) << e.what();
  }
  o.workspace_limit = -1;
  EXPECT_THROW(plan_microbatches(net, o), InvalidArgument);
}

// The paper's effect, literally: with the convolution pinned to the batched algorithm (as a cuDNN
// user fixes an algorithm) and a workspace cap that fits 2 images but not 8, the untransformed
// network cannot run at batch 8; micro-batched into pieces the cap admits, it runs and computes
// exactly what the unconstrained network computes.
TEST_F(Microbatch, PinnedFastAlgorithmRunsUnderTheCapOnlyWhenMicroBatched) {
  Network net = conv_net();
  const int64_t per_image = (16 * 9 + 32) * 144 * 4;
  const Tensor x = random_f32(Shape{8, 16, 12, 12}, 5);
  const Tensor expected = evaluate(net, x);

  OperatorExecutorOptions capped;
  capped.workspace_limit = 2 * per_image;
  capped.pins = parse_implementation_pins({"Conv=reference:batched-im2col"});
  try {
    ReferenceExecutor refused(net, capped);
    FAIL() << "the batched algorithm ran a batch of 8 under a cap for 2";
  } catch (const Unimplemented& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pinned implementation reference:batched-im2col refuses"), std::string::npos) << what;
    EXPECT_NE(what.find("over the limit of " + std::to_string(2 * per_image)), std::string::npos) << what;
  }

  MicrobatchOptions o;
  o.workspace_limit = capped.workspace_limit;
  o.pins = capped.pins;
  o.seconds_per_size = 0.02;
  o.min_runs = 3;
  const MicrobatchPlan plan = plan_microbatches(net, o);
  ASSERT_EQ(plan.convs.size(), 1u);
  // Only sizes the pinned algorithm accepts were candidates: 2 (1 it leaves to the per-image
  // algorithm, 4 and 8 exceed the cap), so the plan is four pairs.
  ASSERT_EQ(plan.convs[0].candidates.size(), 1u);
  EXPECT_EQ(plan.convs[0].candidates[0].implementation, "reference:batched-im2col");
  EXPECT_EQ(plan.convs[0].micro_batches, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(apply_microbatches(net, plan), 1);

  ReferenceExecutor ex(net, capped);
  for (const auto& [node, impl] : ex.implementations()) {
    if (net.node(node).op_type == "Conv") {
      EXPECT_EQ(impl, "reference:batched-im2col") << node;
    }
  }
  const TensorMap out = ex.inference({{"x", x}});
  EXPECT_EQ(compare(out.at("y"), expected, 0, 0).max_abs_error, 0.0);
}

TEST_F(Microbatch, PinsNameRealImplementations) {
  EXPECT_THROW(parse_implementation_pins({"Conv"}), InvalidArgument);
  EXPECT_THROW(parse_implementation_pins({"Conv=reference:winograd"}), InvalidArgument);
  EXPECT_THROW(parse_implementation_pins({"NoSuchOp=reference"}), InvalidArgument);
  EXPECT_THROW(parse_implementation_pins({"Conv=reference", "Conv=reference:batched-im2col"}), InvalidArgument);
  EXPECT_EQ(parse_implementation_pins({"Conv=reference"}).at("Conv"), "reference");
}

}  // namespace
}  // namespace d5
