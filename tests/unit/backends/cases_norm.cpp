// Shared cases: normalization, softmax, reduction, ArgMax, loss and Dropout ops against the reference.
#include <cmath>

#include "shared_cases.h"

namespace d5::test {

namespace {

TensorDesc f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorDesc f64(Shape s) { return {DType::f64, std::move(s)}; }

// Inputs of a normalization: x, then per-channel parameters (variances positive).
std::vector<Tensor> bn_inputs(DType t, const Shape& x, const Shape& p) {
  return {random_input({t, x}, "x", -2, 2), random_input({t, p}, "scale", 0.5, 1.5),
          random_input({t, p}, "bias"), random_input({t, p}, "mean"), random_input({t, p}, "var", 0.5, 2)};
}

}  // namespace

TEST(Normalization, SoftmaxAndLogSoftmax) {
  for (const char* type : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {-1, 0, 1}) check(type, random_inputs({f32({3, 4, 5})}, -3, 3), {{"axis", axis}});
    check(type, random_inputs({f64({2, 7})}, -3, 3));
    check(type, random_inputs({f32({6})}, -3, 3));
    // Before opset 13: coerced to 2-D at 'axis' (default 1), normalized over all trailing axes.
    check(type, random_inputs({f32({2, 3, 4})}, -3, 3), {}, std::nullopt, 11);
    check(type, random_inputs({f64({2, 3, 4})}, -3, 3), {{"axis", int64_t{2}}}, std::nullopt, 11);
    check(type, random_inputs({f32({3, 5, 7})}, -3, 3), {{"axis", int64_t{2}}});
    check(type, random_inputs({f32({32, 1000})}, -5, 5));  // a classifier's scores
  }
}

TEST(Normalization, BatchNormalizationInference) {
  check("BatchNormalization", bn_inputs(DType::f32, {2, 3, 4, 5}, {3}));
  check("BatchNormalization", bn_inputs(DType::f64, {4, 2}, {2}), {{"epsilon", 1e-3}});
  check("BatchNormalization", bn_inputs(DType::f32, {2, 3, 5}, {3}), {{"momentum", 0.7}});
  // spatial=0 (opset 7): one set of statistics per position of [C, D].
  check("BatchNormalization", bn_inputs(DType::f64, {3, 2, 4}, {2, 4}), {{"spatial", int64_t{0}}},
        std::nullopt, 7);
  check("BatchNormalization", bn_inputs(DType::f32, {6, 2, 3}, {2, 3}), {{"spatial", int64_t{0}}},
        std::nullopt, 7);
  for (const Shape& x : {Shape{2, 3}, Shape{4, 16, 7, 7}, Shape{2, 3, 2, 3, 4}})
    check("BatchNormalization", bn_inputs(DType::f32, x, {x[1]}), {{"epsilon", 1e-3}});
}

TEST(Normalization, BatchNormalizationTraining) {
  // Running mean/var outputs and their gradients (flowing into X through the batch statistics).
  const Attributes train{{"training_mode", int64_t{1}}, {"momentum", 0.8}};
  check("BatchNormalization", bn_inputs(DType::f32, {4, 3, 2, 3}, {3}), train);
  check("BatchNormalization", bn_inputs(DType::f64, {5, 2}, {2}), train);
  check("BatchNormalization", bn_inputs(DType::f64, {2, 3, 7}, {3}), train);
  for (const Shape& x : {Shape{8, 3}, Shape{4, 16, 7, 7}, Shape{3, 5, 11}})
    check("BatchNormalization", bn_inputs(DType::f32, x, {x[1]}), train);
}

TEST(Normalization, InstanceNormalization) {
  for (DType t : {DType::f32, DType::f64}) {
    check("InstanceNormalization", {random_input({t, {2, 3, 4, 5}}, "x", -2, 2), random_input({t, {3}}, "s"),
                                    random_input({t, {3}}, "b")});
    check(
        "InstanceNormalization",
        {random_input({t, {1, 2, 9}}, "x", -2, 2), random_input({t, {2}}, "s"), random_input({t, {2}}, "b")},
        {{"epsilon", 0.01}});
  }
}

TEST(Normalization, LayerNormalization) {
  for (DType t : {DType::f32, DType::f64}) {
    check("LayerNormalization", {random_input({t, {2, 3, 4}}, "x", -2, 2), random_input({t, {4}}, "s"),
                                 random_input({t, {4}}, "b")});
    check("LayerNormalization", {random_input({t, {2, 3, 4}}, "x", -2, 2), random_input({t, {3, 4}}, "s")},
          {{"axis", int64_t{1}}});
    // Scale and B broadcast over the normalized axes; Mean/InvStdDev in double (stash_type 11).
    check("LayerNormalization",
          {random_input({t, {2, 3, 4}}, "x", -2, 2), random_input({t, {1, 4}}, "s"),
           random_input({t, {1}}, "b")},
          {{"axis", int64_t{-2}}, {"stash_type", int64_t{11}}, {"epsilon", 1e-3}});
  }
  // f32 statistics (the form oneDNN runs), with and without B, over one to three axes; random
  // upstream gradients reach Mean and InvStdDev too, and both flow back into X.
  struct Case {
    Shape x;
    int64_t axis;
    bool bias;
  };
  for (const auto& c : {Case{{4, 32}, -1, true}, Case{{2, 3, 16}, -1, false}, Case{{2, 3, 4, 5}, 2, true},
                        Case{{3, 7}, 0, true}, Case{{2, 8, 384}, -1, true}}) {
    const size_t from = static_cast<size_t>(c.axis < 0 ? static_cast<int64_t>(c.x.rank()) + c.axis : c.axis);
    const Shape norm(std::vector<int64_t>(c.x.dims().begin() + static_cast<std::ptrdiff_t>(from), c.x.dims().end()));
    std::vector<Tensor> in = {random_input(f32(c.x), "x", -2, 2), random_input(f32(norm), "s")};
    if (c.bias) in.push_back(random_input(f32(norm), "b"));
    check("LayerNormalization", in, {{"axis", c.axis}, {"epsilon", 1e-4}});
  }
}

TEST(Normalization, Lrn) {
  for (int64_t size : {1, 2, 3, 4, 5})
    check("LRN", random_inputs({f32({2, 6, 3, 2})}, -2, 2), {{"size", size}, {"alpha", 0.01}, {"beta", 0.6}});
  check("LRN", random_inputs({f64({2, 5})}, -2, 2), {{"size", int64_t{3}}, {"bias", 2.0}});
  check("LRN", random_inputs({f64({1, 4, 2, 2, 2})}, -2, 2), {{"size", int64_t{2}}});
  for (int64_t size : {1, 3, 5})
    for (const Shape& x : {Shape{2, 7, 5, 5}, Shape{2, 16, 3, 3}, Shape{3, 6}, Shape{1, 9, 2, 2, 3}})
      check("LRN", random_inputs({f32(x)}), {{"size", size}, {"alpha", 0.2}, {"beta", 0.75}, {"bias", 1.5}});
}

TEST(Reduce, Reductions) {
  const Shape x{2, 3, 4};
  for (const char* type : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"}) {
    for (DType t : {DType::f32, DType::f64}) {
      const auto in = random_inputs({{t, x}}, -2, 2);
      check(type, in);                                                         // every axis
      check(type, in, {{"axes", std::vector<int64_t>{1}}}, std::nullopt, 11);  // attribute (opset < 13/18)
      check(type, in, {{"axes", std::vector<int64_t>{0, -1}}, {"keepdims", int64_t{0}}}, std::nullopt, 11);
      // Opset 18: axes as a constant input; empty axes with noop_with_empty_axes is the identity.
      OpSpec s =
          spec_of(type, {in[0].desc(), TensorDesc{DType::i64, Shape{1}}}, {}, {std::nullopt, i64s({2})});
      s.opset = 18;
      check_spec(s, {in[0], i64s({2})});
      OpSpec noop = spec_of(type, {in[0].desc()}, {{"noop_with_empty_axes", int64_t{1}}});
      noop.opset = 18;
      check_spec(noop, in);
    }
    check(type, random_inputs({{DType::i32, x}}, -9, 9), {{"axes", std::vector<int64_t>{1}}}, std::nullopt,
          11);
  }
  // ReduceMax ties: the gradient goes to the first maximum (ATen's amax would split it).
  check("ReduceMax", {Tensor::from_values<double>(Shape{2, 3}, {1, 4, 4, 0, 0, 0})},
        {{"axes", std::vector<int64_t>{1}}}, std::nullopt, 11);
  // Opset 20: ReduceMax of bool, the logical or.
  check("ReduceMax", {Tensor::from_values<bool>(Shape{2, 3}, {false, true, true, false, false, false})},
        {{"keepdims", int64_t{0}}, {"axes", std::vector<int64_t>{1}}}, std::nullopt, 11);
}

TEST(Reduce, ArgMaxArgMin) {
  // Ties (5, 5 / 9, 9 / 1, 1) and a NaN, which is the extreme for both.
  const auto x = Tensor::from_values<float>(Shape{2, 4}, {1, 5, 5, 1, NAN, 3, 9, 9});
  for (const char* type : {"ArgMax", "ArgMin"}) {
    check(type, {x});
    check(type, {x}, {{"axis", int64_t{1}}});
    check(type, {x}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}, {"keepdims", int64_t{0}}});
    check(type, random_inputs({{DType::i32, Shape{3, 5, 2}}}, -3, 3),
          {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}});
    check(type, random_inputs({f64({3, 5, 2})}), {{"axis", int64_t{2}}});
  }
}

TEST(Reduce, NegativeLogLikelihoodLoss) {
  for (const char* red : {"mean", "sum", "none"})
    for (DType t : {DType::f32, DType::f64}) {
      const Attributes a{{"reduction", std::string(red)}};
      const auto logp = random_input({t, {4, 5}}, "logp", -3, 0);
      check("NegativeLogLikelihoodLoss", {logp, Tensor::from_values<int64_t>(Shape{4}, {0, 4, 2, 2})}, a);
      // N-D with weights and an ignored class.
      const auto x = random_input({t, {2, 3, 4}}, "x", -3, 0);
      const auto target = Tensor::from_values<int32_t>(Shape{2, 4}, {0, 1, 2, 1, 2, 2, 0, 1});
      Attributes ai = a;
      ai.set("ignore_index", int64_t{1});
      check("NegativeLogLikelihoodLoss", {x, target, random_input({t, {3}}, "w", 0.5, 2)}, ai);
    }
  // An out-of-range target is an error on every backend.
  const auto logp = random_input(f32({2, 3}), "logp");
  const auto bad = Tensor::from_values<int64_t>(Shape{2}, {0, 3});
  expect_run_refused_everywhere(spec_of("NegativeLogLikelihoodLoss", {logp.desc(), bad.desc()}), {logp, bad});
}

TEST(Reduce, SoftmaxCrossEntropyLoss) {
  for (const char* red : {"mean", "sum", "none"})
    for (DType t : {DType::f32, DType::f64}) {
      const Attributes a{{"reduction", std::string(red)}};
      check("SoftmaxCrossEntropyLoss",
            {random_input({t, {3, 4}}, "x", -2, 2), Tensor::from_values<int64_t>(Shape{3}, {3, 0, 1})}, a);
      Attributes ai = a;
      ai.set("ignore_index", int64_t{-1});
      check("SoftmaxCrossEntropyLoss",
            {random_input({t, {2, 3, 2, 2}}, "x", -2, 2),
             Tensor::from_values<int32_t>(Shape{2, 2, 2}, {0, 1, -1, 2, 2, 2, 0, -1}),
             random_input({t, {3}}, "w", 0.5, 2)},
            ai);
    }
}

TEST(Reduce, MseLoss) {
  for (const char* red : {"mean", "sum", "none"}) {
    check("MSELoss", random_inputs({f32({3, 4}), f32({3, 4})}), {{"reduction", std::string(red)}});
    check("MSELoss", random_inputs({f64({5}), f64({5})}), {{"reduction", std::string(red)}});
  }
}

// CTCLoss (deep500): log_probs not normalized over C, so a backend must give the derivative with
// respect to log_probs itself (torch's native backward is exp(log_probs) more; it would fail the
// gradients). Repeated labels, samples shorter than T, an empty target, padding that is not read;
// the impossible sample ({3, 3, 3} in 4 steps) gives inf and NaN gradients, or 0 with zero_infinity.
TEST(Reduce, CtcLoss) {
  const auto i64 = [](const Shape& s, std::initializer_list<int64_t> v) { return Tensor::from_values<int64_t>(s, v); };
  const auto i32 = [](const Shape& s, std::initializer_list<int32_t> v) { return Tensor::from_values<int32_t>(s, v); };
  for (DType t : {DType::f32, DType::f64}) {
    const auto lp = random_input({t, {6, 4, 5}}, "log_probs", -3, 0);
    const std::vector<Tensor> in = {lp, i64({4, 3}, {1, 1, 2, 4, 3, 0, 2, 0, 0, 0, 0, 0}), i64({4}, {6, 5, 3, 2}),
                                    i64({4}, {3, 2, 1, 0})};
    for (const char* red : {"mean", "sum", "none"}) check("CTCLoss", in, {{"reduction", std::string(red)}});
    // blank 4 with int32 indices: its labels are 0..3.
    const std::vector<Tensor> blank4 = {lp, i32({4, 3}, {0, 0, 3, 3, 3, 3, 1, 2, 4, 2, 4, 4}), i32({4}, {6, 4, 3, 1}),
                                        i32({4}, {3, 3, 2, 1})};
    for (int64_t zero_infinity : {0, 1})
      check("CTCLoss", blank4,
            {{"blank", int64_t{4}}, {"zero_infinity", zero_infinity}, {"reduction", std::string("none")}});
    check("CTCLoss", blank4, {{"blank", int64_t{4}}, {"zero_infinity", int64_t{1}}});
  }
  // Lengths and labels out of range are errors on every backend (ATen reads a label past C).
  const auto lp = random_input(f32({3, 2, 4}), "log_probs", -3, 0);
  const auto il = i64({2}, {3, 3}), tl = i64({2}, {2, 1});
  const auto spec = spec_of("CTCLoss", {lp.desc(), TensorDesc{DType::i64, {2, 2}}, il.desc(), tl.desc()});
  expect_run_refused_everywhere(spec, {lp, i64({2, 2}, {1, 4, 2, 0}), il, tl});  // label C
  expect_run_refused_everywhere(spec, {lp, i64({2, 2}, {1, 2, 0, 0}), il, tl});  // the blank
  expect_run_refused_everywhere(spec, {lp, i64({2, 2}, {1, 2, 3, 0}), i64({2}, {3, 0}), tl});
  expect_run_refused_everywhere(spec, {lp, i64({2, 2}, {1, 2, 3, 0}), il, i64({2}, {3, 1})});
}

TEST(Reduce, DropoutInferenceIsIdentity) {
  check("Dropout", random_inputs({f32({3, 4})}));
  check("Dropout", {random_input(f64({6}), "x"), Tensor::from_values<double>(Shape{}, {0.3}),
                    Tensor::from_values<bool>(Shape{}, {false})});
}

}  // namespace d5::test
