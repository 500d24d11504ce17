// The f64 oracle: the double-precision twin of a network, and the judgement of f32 tensors that
// the f32 reference cannot settle element-wise, with a network whose rounding error is known by
// construction: y = (x + 2^16) - 2^16 rounds x to multiples of 2^-7 in f32 and is x exactly in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/f64_oracle.h"
#include "deep500/net/operator_executor.h"
#include "deep500/op/native_op.h"
#include "deep500/op/op_registry.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

class F64Oracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

TEST_F(F64Oracle, TwinWidensEveryF32ValueAndComputesTheSameFunction) {
  Network net = test::mlp(3, 5, 7, 4);
  const auto feeds = test::feeds_for(net, 4);
  Network twin = f64_twin(net);
  EXPECT_EQ(twin.fetch_tensor("W1").dtype(), DType::f64);
  EXPECT_EQ(twin.is_param("W1"), net.is_param("W1"));
  twin.infer();
  EXPECT_EQ(twin.desc("x").dtype, DType::f64);
  EXPECT_EQ(twin.desc("labels").dtype, DType::i64);  // labels stay integers
  const TensorMap wide = f64_feeds(feeds);
  EXPECT_EQ(wide.at("x").dtype(), DType::f64);
  EXPECT_EQ(wide.at("labels").dtype(), DType::i64);
  // Same weights, same function: the f32 logits are the f64 ones rounded along the way.
  ReferenceExecutor narrow_ex(net), wide_ex(twin);
  const Tensor a = narrow_ex.inference(feeds).at("logits"), b = wide_ex.inference(wide).at("logits");
  ASSERT_EQ(b.dtype(), DType::f64);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.get(i), b.get(i), 1e-5 * (1 + std::abs(b.get(i))));
}

TEST_F(F64Oracle, TwinRetargetsCastToFloatAndRefusesOtherTypedAttributes) {
  Network net("casts");
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.add_node({"to_float", "Cast", "", Attributes{{"to", int64_t{1}}}, {"x"}, {"y"}});
  net.add_node({"to_int", "Cast", "", Attributes{{"to", int64_t{7}}}, {"y"}, {"z"}});
  net.add_output("z");
  Network twin = f64_twin(net);
  EXPECT_EQ(twin.node("to_float").attrs.get_int("to"), 11);  // FLOAT -> DOUBLE
  EXPECT_EQ(twin.node("to_int").attrs.get_int("to"), 7);     // INT64 stays

  OpRegistry::global().add_or_replace(
      {"TypedFill", "reference", "reference", true,
       [](const OpSpec& s) -> OpCreateResult {
         return custom_op_from_native(
             s, {s.inputs[0]},
             [](std::span<const Tensor> in, std::span<Tensor> out) { out[0].copy_from(in[0]); }, {},
             {.implementation = "reference", .differentiable = {}, .flops = 0});
       },
       "a node with a 'dtype' attribute, for testing"});
  Network typed("typed");
  typed.add_input("x", TensorDesc{DType::f32, Shape{2}});
  typed.add_node({"fill", "TypedFill", "", Attributes{{"dtype", int64_t{1}}}, {"x"}, {"y"}});
  typed.add_output("y");
  try {
    f64_twin(typed);
    FAIL() << "a 'dtype' attribute has no f64 translation";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("node 'fill' (TypedFill): its attribute 'dtype'"), std::string::npos)
        << e.what();
  }
}

// loss = ReduceSum(y * W) over y = `through`(x): W@grad is y. The reference's y is
// (x + 2^16) - 2^16, x rounded to a multiple of 2^-7 (errors up to 0.004 on values in [-1, 1]).
Network rounding_net(const std::string& through, double gain = 1) {
  Network net("rounding");
  net.add_input("x", TensorDesc{DType::f32, Shape{4, 64}});
  net.feed_tensor("shift", Tensor::from_values<float>(Shape{}, {65536.0f}));
  net.feed_tensor("gain", Tensor::from_values<float>(Shape{}, {static_cast<float>(gain)}));
  test::add_param(net, "W", DType::f32, Shape{4, 64}, 1);
  if (through == "shift") {
    net.add_node({"up", "Add", "", {}, {"x", "shift"}, {"s"}});
    net.add_node({"down", "Sub", "", {}, {"s", "shift"}, {"y"}});
  } else {  // exact: y = gain * x
    net.add_node({"scale", "Mul", "", {}, {"x", "gain"}, {"y"}});
  }
  net.add_node({"prod", "Mul", "", {}, {"y", "W"}, {"p"}});
  net.add_node({"loss", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"p"}, {"loss_value"}});
  net.add_output("y");
  return net;
}

TensorMap rounding_feeds() {
  return {{"x", test::random_tensor(TensorDesc{DType::f32, Shape{4, 64}}, "x")}};
}

// An executor that computes the exact values fails the element-wise check against the rounded
// reference but passes against the f64 run; one 10 % off fails both.
TEST_F(F64Oracle, ExactResultsPassAndWrongOnesFailWhereTheF32ReferenceCannotJudge) {
  Network ref_net = rounding_net("shift"), exact_net = rounding_net("exact"), wrong_net = rounding_net("exact", 1.1);
  ReferenceExecutor ref(ref_net), exact(exact_net), wrong(wrong_net);
  const TensorMap feeds = rounding_feeds();

  const auto strict = test_executor_backprop(exact, feeds, "loss_value", ref, {.rtol = 1e-3, .atol = 1e-5});
  ASSERT_EQ(strict.state, CaseState::Failed) << "the network must defeat the element-wise check";
  EXPECT_FALSE(strict.extra.contains("f64_oracle")) << "explicit tolerances mean element-wise only";

  const auto ok = test_executor_backprop(exact, feeds, "loss_value", ref);
  EXPECT_EQ(ok.state, CaseState::Passed) << ok.detail;
  EXPECT_NE(ok.detail.find("judged against the reference's f64 run"), std::string::npos) << ok.detail;
  ASSERT_TRUE(ok.extra["f64_oracle"].is_array());
  bool judged_w = false;
  for (const auto& t : ok.extra["f64_oracle"]) {
    EXPECT_EQ(t["error"].get<double>(), 0) << t.dump();  // y = x exactly, W@grad = y
    if (t["name"] == "W@grad") {
      judged_w = true;
      // x uniform in [-1, 1] rounded to a 2^-7 grid: relative l2 about (2^-7 / sqrt(12)) / (1 / sqrt(3)).
      EXPECT_NEAR(t["reference_error"].get<double>(), 0.0039, 0.001) << t.dump();
    }
  }
  EXPECT_TRUE(judged_w) << ok.extra["f64_oracle"].dump();

  const auto bad = test_executor_backprop(wrong, feeds, "loss_value", ref);
  EXPECT_EQ(bad.state, CaseState::Failed) << bad.detail;
  EXPECT_NE(bad.detail.find("from the reference's f64 run, more than 8 times the f32 reference's own"),
            std::string::npos)
      << bad.detail;

  // Inference alone: the output y is judged the same way.
  EXPECT_EQ(test_executor(exact, feeds, ref).state, CaseState::Passed);
  EXPECT_EQ(test_executor(wrong, feeds, ref).state, CaseState::Failed);
}

// The bound itself: an executor up to kF64ErrorRatio times as far from the exact values as the
// f32 reference passes, one beyond fails.
TEST_F(F64Oracle, TheBoundIsARatioOfDistancesFromTheExactValues) {
  Network net = rounding_net("shift");
  const TensorMap feeds = rounding_feeds();
  ReferenceExecutor ref(net);
  const Tensor r32 = ref.inference(feeds).at("y");
  Tensor exact = feeds.at("x").cast(DType::f64);
  auto off_by = [&](double k) {  // exact + k * (r32 - exact), in f32
    Tensor t = r32.clone();
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, exact.get(i) + k * (r32.get(i) - exact.get(i)));
    return t;
  };
  for (double k : {0.0, 1.0, 7.5, 8.5, 20.0}) {
    const Tensor actual = off_by(k);
    const ComparedTensor c{"output 'y'", 0, "y", actual, r32, Tolerance{1e-4, 1e-6}};
    const std::vector<const ComparedTensor*> tensors{&c};
    const F64Judgement j = judge_against_f64(net, feeds, "", tensors);
    EXPECT_EQ(j.state, k <= kF64ErrorRatio ? CaseState::Passed : CaseState::Failed) << "k = " << k << ": " << j.detail;
    EXPECT_NEAR(j.tensors[0]["error"].get<double>(), k * j.tensors[0]["reference_error"].get<double>(),
                1e-6 + 1e-6 * k)
        << j.tensors[0].dump();
  }
}

}  // namespace
}  // namespace d5
