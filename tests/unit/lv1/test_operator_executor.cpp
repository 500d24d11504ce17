// The operator executor: results, events, lifetimes, fallbacks, re-planning and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/op/native_op.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

using test::feeds_for;

class OperatorExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

// The MLP's logits computed directly, in double.
std::vector<double> mlp_logits_by_hand(const Network& net, const Tensor& x) {
  const Tensor W1 = net.fetch_tensor("W1"), b1 = net.fetch_tensor("b1");
  const Tensor W2 = net.fetch_tensor("W2"), b2 = net.fetch_tensor("b2");
  const int64_t n = x.shape()[0], f = x.shape()[1], h = W1.shape()[0], c = W2.shape()[0];
  std::vector<double> out(static_cast<size_t>(n * c));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> a(static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j) {
      double s = b1.get(j);
      for (int64_t k = 0; k < f; ++k) s += x.get(i * f + k) * W1.get(j * f + k);
      a[static_cast<size_t>(j)] = std::max(s, 0.0);
    }
    for (int64_t j = 0; j < c; ++j) {
      double s = b2.get(j);
      for (int64_t k = 0; k < h; ++k) s += a[static_cast<size_t>(k)] * W2.get(j * h + k);
      out[static_cast<size_t>(i * c + j)] = s;
    }
  }
  return out;
}

TEST_F(OperatorExecutorTest, InferenceMatchesAComputationByHand) {
  Network net = test::mlp(4, 6, 8, 3);
  ReferenceExecutor ex(net);
  const auto feeds = feeds_for(net, 3);
  const auto out = ex.inference(feeds);
  ASSERT_EQ(out.size(), 1u);
  const Tensor& logits = out.at("logits");
  EXPECT_EQ(logits.shape(), (Shape{4, 3}));
  const auto want = mlp_logits_by_hand(net, feeds.at("x"));
  // f32 sums of 6 and 8 products of values below 1: rounding stays far below 1e-5.
  for (int64_t i = 0; i < logits.numel(); ++i)
    EXPECT_NEAR(logits.get(i), want[static_cast<size_t>(i)], 1e-5) << i;
  // Outputs are stored in the network too.
  EXPECT_EQ(net.fetch_tensor("logits").data(), logits.data());
  EXPECT_EQ(ex.backend(), "reference");
  EXPECT_TRUE(ex.fallbacks().empty());
  EXPECT_EQ(ex.implementations().at("fc1"), "reference");
}

TEST_F(OperatorExecutorTest, RegisteredExecutorsAreMadeByName) {
  const auto names = executor_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
  Network net = test::mlp(2, 3, 4, 2);
  auto ex = make_executor(net, "reference");
  EXPECT_EQ(ex->backend(), "reference");
  // A name deep500 does not have is a usage error, a built backend without an executor an
  // Unimplemented, a backend this build left out a NotBuilt (docs/cli.md#exit-codes).
  EXPECT_THROW(make_executor(net, "no-such-backend"), InvalidArgument);
  BackendInfo noexec;
  noexec.name = "no-executor-backend";
  register_backend(noexec);
  try {
    make_executor(net, "no-executor-backend");
    FAIL() << "an executor appeared";
  } catch (const Unimplemented& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unimplemented) << e.what();
  }
  for (const char* name : {"torch", "onednn", "cuda"}) {
    if (!is_not_built_backend(name)) continue;
    EXPECT_THROW(make_executor(net, name), NotBuilt) << name;
  }
}

// Records every event as one line.
class Recorder : public ExecutorEvent {
 public:
  std::vector<std::string> log;
  std::string stop_after;  // node whose forward after_operator returns false
  void before_executor(const TensorMap& feeds) override {
    log.push_back(fmt::format("begin {}", feeds.size()));
  }
  bool before_operator(const Node& n, Pass p, std::span<const Tensor>) override {
    log.push_back(fmt::format("{} {}", p == Pass::forward ? "fwd" : "bwd", n.name));
    return true;
  }
  bool after_operator(const Node& n, Pass p, std::span<const Tensor> outputs) override {
    // Forward outputs are the node's results; backward outputs the gradients of its inputs.
    if (p == Pass::forward) {
      EXPECT_FALSE(outputs.empty()) << n.name;
    }
    return !(p == Pass::forward && n.name == stop_after);
  }
  void after_inference(const TensorMap& outputs) override {
    log.push_back(fmt::format("inferred {}", outputs.size()));
  }
  void after_backprop(const TensorMap& grads) override {
    log.push_back(fmt::format("backprop {}", grads.size()));
  }
  void after_executor(const TensorMap& outputs) override {
    log.push_back(fmt::format("end {}", outputs.size()));
  }
};

TEST_F(OperatorExecutorTest, EventsComeInOrderAndSkipFoldedNodes) {
  Network net = test::shape_chain(2, 3);
  ReferenceExecutor ex(net);
  auto rec = std::make_shared<Recorder>();
  ex.add_event(rec);
  ex.inference_and_backprop(feeds_for(net, 3), "loss_value");
  // The Shape chain is folded: neither pass runs it. Backward runs in reverse order, and the
  // first Conv's backward runs (its weight is a parameter) though its input x needs no gradient.
  const std::vector<std::string> want = {"begin 2",     "fwd conv",   "fwd reshape", "fwd fc",
                                         "fwd loss",    "inferred 2", "bwd loss",    "bwd fc",
                                         "bwd reshape", "bwd conv",   "backprop 2",  "end 2"};
  EXPECT_EQ(rec->log, want);
  EXPECT_EQ(ex.implementations().at("gather"), "folded (computed at inference)");
  EXPECT_FALSE(ex.stopped());
}

TEST_F(OperatorExecutorTest, AnEventStopsTheRunEarly) {
  Network net = test::mlp(2, 3, 4, 2);
  ReferenceExecutor ex(net);
  auto rec = std::make_shared<Recorder>();
  rec->stop_after = "relu";
  ex.add_event(rec);
  const auto out = ex.inference_and_backprop(feeds_for(net, 2), "loss_value");
  EXPECT_TRUE(ex.stopped());
  EXPECT_TRUE(out.empty());  // logits come after the stop
  const std::vector<std::string> want = {"begin 2", "fwd fc1", "fwd relu", "end 0"};
  EXPECT_EQ(rec->log, want);
  EXPECT_FALSE(net.has_value("W1@grad"));  // no backward ran
  // The next call starts afresh.
  rec->stop_after.clear();
  ex.inference(feeds_for(net, 2));
  EXPECT_FALSE(ex.stopped());
  ex.remove_event(rec);
  EXPECT_TRUE(ex.events().empty());
}

// A chain of `layers` element-wise ops on a [rows, cols] tensor: every intermediate has the same
// size, so the peak is a count of tensors alive at once.
Network chain(int layers, int64_t rows, int64_t cols) {
  Network net("chain");
  net.add_input("x", TensorDesc{DType::f32, Shape{rows, cols}});
  net.feed_tensor("w", test::random_tensor(TensorDesc{DType::f32, Shape{rows, cols}}, "w"), true);
  std::string prev = "x";
  for (int k = 0; k < layers; ++k) {
    const std::string out = fmt::format("t{}", k);
    if (k == 0) net.add_node({"mul0", "Mul", "", {}, {prev, "w"}, {out}});
    else net.add_node({fmt::format("tanh{}", k), "Tanh", "", {}, {prev}, {out}});
    prev = out;
  }
  net.add_node({"loss", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {prev}, {"loss_value"}});
  net.add_output(prev);
  return net;
}

TEST_F(OperatorExecutorTest, FreeingDeadTensorsLowersThePeak) {
  const int layers = 8;
  Network net = chain(layers, 64, 1024);
  const int64_t t = 64 * 1024 * 4;  // bytes of one intermediate
  const TensorMap feeds = {{"x", test::random_tensor(net.desc("x"), "x")}};
  ReferenceExecutor ex(net);
  ex.inference(feeds);
  EXPECT_EQ(ex.memory().peak_rss_bytes, -1);  // not asked for
  const int64_t freed = ex.memory().peak_tensor_bytes;
  ex.set_options({.free_dead_tensors = false, .measure_rss = true});
  ex.inference(feeds);
  const int64_t kept = ex.memory().peak_tensor_bytes;
  // Each step holds its input and its output; without freeing, all `layers` stay.
  EXPECT_EQ(freed, 2 * t);
  EXPECT_EQ(kept, layers * t);
  RecordProperty("inference_peak_bytes_freed", std::to_string(freed));
  RecordProperty("inference_peak_bytes_kept", std::to_string(kept));

  // Training: Tanh's backward reads its output, so forward keeps the chain's values either way;
  // freeing then drops each value and gradient as soon as backward is past it.
  ex.set_options({.free_dead_tensors = true, .measure_rss = true});
  ex.inference_and_backprop(feeds, "loss_value");
  const int64_t train_freed = ex.memory().peak_tensor_bytes;
  EXPECT_GT(ex.memory().peak_rss_bytes, 0);
  ex.set_options({.free_dead_tensors = false, .measure_rss = false});
  ex.inference_and_backprop(feeds, "loss_value");
  const int64_t train_kept = ex.memory().peak_tensor_bytes;
  EXPECT_EQ(ex.memory().peak_rss_bytes, -1);
  EXPECT_LT(train_freed, train_kept);
  // Kept: 8 values and their 8 gradients; at the end, Mul's backward adds the gradients of both
  // its inputs (x's is dropped at once, but it was allocated); and the loss and its gradient.
  EXPECT_EQ(train_kept, (2 * layers + 2) * t + 2 * 4);
  RecordProperty("train_peak_bytes_freed", std::to_string(train_freed));
  RecordProperty("train_peak_bytes_kept", std::to_string(train_kept));
  std::printf("peak tensor bytes: inference %lld freed vs %lld kept; training %lld freed vs %lld kept\n",
              static_cast<long long>(freed), static_cast<long long>(kept), static_cast<long long>(train_freed),
              static_cast<long long>(train_kept));
}

TEST_F(OperatorExecutorTest, ParameterUpdatesAndGraphEditsAreSeen) {
  Network net = test::mlp(2, 3, 4, 2);
  ReferenceExecutor ex(net);
  const auto feeds = feeds_for(net, 2);
  const Tensor before = ex.inference(feeds).at("logits").clone();
  // An optimizer writes parameters: the next call reads them, without re-planning.
  Tensor b2 = net.fetch_tensor("b2").clone();
  b2.set(0, b2.get(0) + 1.0);
  net.feed_tensor("b2", b2);
  const Tensor after = ex.inference(feeds).at("logits");
  EXPECT_NEAR(after.get(0) - before.get(0), 1.0, 1e-6);
  EXPECT_NEAR(after.get(1), before.get(1), 1e-6);
  // A graph edit changes the network's version: the executor re-plans on its next call.
  net.add_output("h");
  const auto out = ex.inference(feeds);
  EXPECT_EQ(out.count("h"), 1u);
  EXPECT_EQ(out.at("h").shape(), (Shape{2, 4}));
}

TEST_F(OperatorExecutorTest, BadInputsAreNamedErrors) {
  Network net = test::mlp(2, 3, 4, 2);
  ReferenceExecutor ex(net);
  auto feeds = feeds_for(net, 2);
  EXPECT_THROW(ex.inference_and_backprop(feeds, "no_such_tensor"), InvalidArgument);
  try {
    ex.inference_and_backprop(feeds, "logits");  // not one element
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("loss 'logits' must be one floating-point value"), std::string::npos)
        << e.what();
  }
  feeds.erase("labels");
  EXPECT_THROW(ex.inference(feeds), InvalidArgument);

  Network odd("odd");
  odd.add_input("x", TensorDesc{DType::f32, Shape{2}});
  odd.add_node({"mystery", "NoSuchOp", "", {}, {"x"}, {"y"}});
  odd.add_output("y");
  try {
    ReferenceExecutor bad(odd);
    FAIL();
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("mystery"), std::string::npos) << e.what();
  }
}

// A user operator: y = x^3 with its derivative 3x^2, registered on every backend at run time.
void register_cube() {
  register_custom_op(
      "Cube",
      [](const OpSpec& s) -> OpCreateResult {
        return custom_op_from_native(
            s, {s.inputs[0]},
            [](std::span<const Tensor> in, std::span<Tensor> out) {
              for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, std::pow(in[0].get(i), 3));
            },
            [](std::span<const Tensor> g, std::span<const Tensor> in, std::span<const Tensor>,
               std::span<Tensor> gin) {
              for (int64_t i = 0; i < in[0].numel(); ++i)
                gin[0].set(i, 3 * std::pow(in[0].get(i), 2) * g[0].get(i));
            },
            {.implementation = "native:cube", .differentiable = {}, .flops = 0});
      },
      true, "x^3");
}

TEST_F(OperatorExecutorTest, CustomOperatorsRunInEveryExecutor) {
  register_cube();
  for (const auto& backend : executor_backends()) {
    Network net("cubic");
    net.add_input("x", TensorDesc{DType::f32, Shape{2, 3}});
    net.feed_tensor("w", Tensor::from_values<float>(Shape{2, 3}, {0.5f, -1, 2, 1.5f, 0.25f, -0.75f}), true);
    net.add_node({"mul", "Mul", "", {}, {"x", "w"}, {"xw"}});
    net.add_node({"cube", "Cube", "", {}, {"xw"}, {"y"}});
    net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"y"}, {"loss"}});
    net.add_output("y");
    auto ex = make_executor(net, backend);
    // The torch executor runs it as a LibTorch autograd function around the same operator.
    EXPECT_NE(ex->implementations().at("cube").find("native:cube"), std::string::npos) << backend;
    const Tensor x = Tensor::from_values<float>(Shape{2, 3}, {1, 2, -1, 0.5f, 2, 1});
    const auto out = ex->inference_and_backprop({{"x", x}}, "loss");
    // d/dw sum((x w)^3) = 3 (x w)^2 x
    const Tensor w = net.fetch_tensor("w"), g = net.fetch_tensor("w@grad");
    for (int64_t i = 0; i < 6; ++i) {
      const double xw = x.get(i) * w.get(i);
      EXPECT_NEAR(out.at("y").get(i), xw * xw * xw, 1e-5) << backend;
      EXPECT_NEAR(g.get(i), 3 * xw * xw * x.get(i), 1e-4) << backend;
    }
  }
}

TEST_F(OperatorExecutorTest, ParametersTheLossDoesNotReachGetZeroGradients) {
  Network net = test::mlp(2, 3, 4, 2);
  net.feed_tensor("unused", test::random_tensor(TensorDesc{DType::f32, Shape{5}}, "unused"), true);
  ReferenceExecutor ex(net);
  ex.inference_and_backprop(feeds_for(net, 2), "loss_value");
  const Tensor g = net.fetch_tensor("unused@grad");
  EXPECT_EQ(g.shape(), (Shape{5}));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(g.get(i), 0.0);
  EXPECT_TRUE(net.has_value("W1@grad"));
}

#ifdef D5_TEST_HAVE_ONEDNN
TEST_F(OperatorExecutorTest, OneDnnExecutorReportsWhatFellBack) {
  Network net = test::cnn(2, 3);
  auto ex = make_executor(net, "onednn");
  EXPECT_EQ(ex->backend(), "onednn");
  const auto impl = ex->implementations();
  EXPECT_EQ(impl.at("conv").rfind("onednn", 0), 0u) << impl.at("conv");
  EXPECT_EQ(impl.at("fc").rfind("onednn", 0), 0u) << impl.at("fc");
  // oneDNN has no loss operator: it runs on the reference, and the report says why.
  bool loss_fell_back = false;
  for (const auto& [node, why] : ex->fallbacks()) {
    EXPECT_FALSE(why.empty()) << node;
    if (node == "loss") loss_fell_back = true;
  }
  EXPECT_TRUE(loss_fell_back);
  EXPECT_NE(impl.at("loss").find("(fallback: "), std::string::npos) << impl.at("loss");
  const auto out = ex->inference_and_backprop(feeds_for(net, 3), "loss_value");
  EXPECT_EQ(out.at("probs").shape(), (Shape{2, 3}));
  EXPECT_TRUE(net.has_value("conv_w@grad"));
}
#endif

}  // namespace
}  // namespace d5
