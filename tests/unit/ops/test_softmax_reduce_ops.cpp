// Softmax, LogSoftmax and the reductions: hand-computed values, opset variants, errors and
// gradient checks.
#include <cmath>

#include "norm_test_util.h"

namespace d5::test {

namespace {

OpSpec at_opset(OpSpec s, int opset) {
  s.opset = opset;
  return s;
}

Tensor i64(std::initializer_list<int64_t> v) {
  return Tensor::from_values<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

}  // namespace

// ---- Softmax / LogSoftmax -------------------------------------------------------------------

TEST(Softmax, LastAxisAndLargeInputs) {
  // Row 0: exp {1, 2, 5} / 8. Row 1: three equal scores of 1000 (exp would overflow without the
  // max subtraction) -> 1/3 each.
  const std::vector<Tensor> in = {f64({2, 3}, {0, std::log(2.0), std::log(5.0), 1000, 1000, 1000})};
  auto sm = make_op(spec_of("Softmax", {in[0].desc()}));
  expect_values(sm->run_forward(in)[0], {1.0 / 8, 2.0 / 8, 5.0 / 8, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  auto lsm = make_op(spec_of("LogSoftmax", {in[0].desc()}));
  const double l8 = std::log(8.0), l3 = std::log(3.0);
  expect_values(lsm->run_forward(in)[0], {-l8, std::log(2.0) - l8, std::log(5.0) - l8, -l3, -l3, -l3});
}

TEST(Softmax, AxisZero) {
  // Columns: {0, ln3} -> {1/4, 3/4}; {0, 0} -> {1/2, 1/2}; {0, -ln3} -> {3/4, 1/4}.
  const std::vector<Tensor> in = {f64({2, 3}, {0, 0, 0, std::log(3.0), 0, -std::log(3.0)})};
  auto op = make_op(spec_of("Softmax", {in[0].desc()}, {{"axis", int64_t{0}}}));
  expect_values(op->run_forward(in)[0], {0.25, 0.5, 0.75, 0.75, 0.5, 0.25});
}

TEST(Softmax, OpsetBefore13CoercesTo2D) {
  // X [2, 2, 2], sample 0 = {0, ln2, ln3, ln4}, sample 1 = zeros.
  // opset 11, axis 1 (default): one softmax over the 4 trailing values -> {.1, .2, .3, .4}, {.25 x4}.
  // opset 13, axis 1: pairs along axis 1: (0, ln3) -> {1/4, 3/4}, (ln2, ln4) -> {1/3, 2/3}.
  const std::vector<Tensor> in = {
      f64({2, 2, 2}, {0, std::log(2.0), std::log(3.0), std::log(4.0), 0, 0, 0, 0})};
  auto old = make_op(at_opset(spec_of("Softmax", {in[0].desc()}), 11));
  expect_values(old->run_forward(in)[0], {0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.25, 0.25});
  auto now = make_op(spec_of("Softmax", {in[0].desc()}, {{"axis", int64_t{1}}}));
  expect_values(now->run_forward(in)[0], {0.25, 1.0 / 3, 0.75, 2.0 / 3, 0.5, 0.5, 0.5, 0.5});
  auto old_log = make_op(at_opset(spec_of("LogSoftmax", {in[0].desc()}), 11));
  expect_values(old_log->run_forward(in)[0],
                {std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4), std::log(0.25), std::log(0.25),
                 std::log(0.25), std::log(0.25)});
}

TEST(Softmax, FloatInput) {
  auto op = make_op(spec_of("Softmax", {{DType::f32, {2}}}));
  const std::vector<Tensor> in = {Tensor::from_values<float>({2}, {0, std::log(3.0f)})};
  expect_values(op->run_forward(in)[0], {0.25, 0.75}, 1e-6);
}

TEST(Softmax, Gradients) {
  const std::vector<Tensor> in = {random_tensor(DType::f64, {3, 4, 5}, "sm", -3, 3)};
  for (const char* type : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {-1, 1, 0}) {
      auto op = make_op(spec_of(type, {in[0].desc()}, {{"axis", axis}}));
      expect_gradient_ok(*op, in);
    }
    auto old = make_op(at_opset(spec_of(type, {in[0].desc()}), 11));
    expect_gradient_ok(*old, in);
  }
}

TEST(Softmax, Errors) {
  expect_invalid(spec_of("Softmax", {{DType::f32, {2, 3}}}, {{"axis", int64_t{2}}}), "axis=2");
  expect_invalid(spec_of("LogSoftmax", {{DType::f32, {2, 3}}}, {{"axis", int64_t{-3}}}), "axis=-3");
  expect_invalid(spec_of("Softmax", {{DType::i32, {2, 3}}}), "dtype");
}

// ---- Reductions -----------------------------------------------------------------------------

// X = [[1, 2, 3], [4, 5, 6]] for the value tests.
Tensor x23() { return f64({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(Reduce, SumWithAttributeAndInputAxes) {
  const Tensor x = x23();
  auto rows = make_op(at_opset(spec_of("ReduceSum", {x.desc()}, {{"axes", std::vector<int64_t>{1}}}), 11));
  auto out = rows->run_forward(std::vector<Tensor>{x})[0];
  EXPECT_EQ(out.shape(), (Shape{2, 1}));
  expect_values(out, {6, 15});

  // Opset 13: axes as a constant input; keepdims 0 drops axis 0 -> [3] = column sums.
  const Tensor axes = i64({0});
  auto cols = make_op(
      spec_of("ReduceSum", {x.desc(), axes.desc()}, {{"keepdims", int64_t{0}}}, {std::nullopt, axes}));
  out = cols->run_forward(std::vector<Tensor>{x, axes})[0];
  EXPECT_EQ(out.shape(), (Shape{3}));
  expect_values(out, {5, 7, 9});

  // Negative axis.
  auto last = make_op(
      spec_of("ReduceSum", {x.desc()}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}}));
  expect_values(last->run_forward(std::vector<Tensor>{x})[0], {6, 15});
}

TEST(Reduce, EmptyAxesReduceAllOrNothing) {
  const Tensor x = x23();
  auto all = make_op(spec_of("ReduceSum", {x.desc()}, {{"keepdims", int64_t{0}}}));
  auto out = all->run_forward(std::vector<Tensor>{x})[0];
  EXPECT_EQ(out.shape(), Shape{});
  expect_values(out, {21});
  auto kept = make_op(spec_of("ReduceMean", {x.desc()}));
  out = kept->run_forward(std::vector<Tensor>{x})[0];
  EXPECT_EQ(out.shape(), (Shape{1, 1}));
  expect_values(out, {3.5});
  // An empty axes input with noop_with_empty_axes=1 is the identity.
  const Tensor none(DType::i64, Shape{0});
  auto noop = make_op(spec_of("ReduceSum", {x.desc(), none.desc()}, {{"noop_with_empty_axes", int64_t{1}}},
                              {std::nullopt, none}));
  out = noop->run_forward(std::vector<Tensor>{x, none})[0];
  EXPECT_EQ(out.shape(), x.shape());
  expect_values(out, values(x));
  expect_gradient_ok(*noop, {random_tensor(DType::f64, {2, 3}, "noop"), none});
}

TEST(Reduce, MeanMaxL2) {
  const Tensor x = x23();
  auto mean = make_op(spec_of("ReduceMean", {x.desc()}, {{"axes", std::vector<int64_t>{1}}}));
  expect_values(mean->run_forward(std::vector<Tensor>{x})[0], {2, 5});
  // Max of [[1, 5, 3], [4, 2, 6]] along axis 1 -> {5, 6}; along axis 0 -> {4, 5, 6}.
  const Tensor m = f64({2, 3}, {1, 5, 3, 4, 2, 6});
  auto max1 = make_op(spec_of("ReduceMax", {m.desc()}, {{"axes", std::vector<int64_t>{1}}}));
  expect_values(max1->run_forward(std::vector<Tensor>{m})[0], {5, 6});
  auto max0 = make_op(
      spec_of("ReduceMax", {m.desc()}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}));
  expect_values(max0->run_forward(std::vector<Tensor>{m})[0], {4, 5, 6});
  // L2 of rows {3, 4, 0} and {6, 8, 0} -> {5, 10}.
  const Tensor l = f64({2, 3}, {3, 4, 0, 6, 8, 0});
  auto l2 = make_op(spec_of("ReduceL2", {l.desc()}, {{"axes", std::vector<int64_t>{1}}}));
  expect_values(l2->run_forward(std::vector<Tensor>{l})[0], {5, 10});
}

TEST(Reduce, IntegerDtypes) {
  // int8 sum wraps like integer addition: 100 * 3 = 300 = 44 (mod 256).
  const Tensor i8 = Tensor::from_values<int8_t>({3}, {100, 100, 100});
  auto sum = make_op(spec_of("ReduceSum", {i8.desc()}));
  expect_values(sum->run_forward(std::vector<Tensor>{i8})[0], {44});
  // Integer mean truncates: (1 + 2) / 2 = 1.5 -> 1. Max of {-1, -7, -3} = -1.
  const Tensor i32 = Tensor::from_values<int32_t>({2}, {1, 2});
  expect_values(make_op(spec_of("ReduceMean", {i32.desc()}))->run_forward(std::vector<Tensor>{i32})[0], {1});
  const Tensor neg = Tensor::from_values<int32_t>({3}, {-1, -7, -3});
  auto max = make_op(spec_of("ReduceMax", {neg.desc()}));
  expect_values(max->run_forward(std::vector<Tensor>{neg})[0], {-1});
  EXPECT_FALSE(max->has_gradient());
  EXPECT_NE(max->no_gradient_reason().find("integer"), std::string::npos);
}

// Opset 20: ReduceMax of bool is the logical or (false over an empty axis); the other
// reductions still refuse bool.
TEST(Reduce, MaxOfBoolIsTheLogicalOr) {
  const Tensor b = Tensor::from_values<bool>({2, 3}, {false, true, false, false, false, false});
  auto op = make_op(spec_of("ReduceMax", {b.desc()}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
  const Tensor y = op->run_forward(std::vector<Tensor>{b})[0];
  EXPECT_EQ(y.dtype(), DType::boolean);
  expect_values(y, {1, 0});
  const Tensor empty(TensorDesc{DType::boolean, Shape{2, 0}});
  auto none = make_op(spec_of("ReduceMax", {empty.desc()}, {{"axes", std::vector<int64_t>{1}}}));
  expect_values(none->run_forward(std::vector<Tensor>{empty})[0], {0, 0});
  EXPECT_THROW(make_op(spec_of("ReduceSum", {b.desc()})), InvalidArgument);
}

TEST(Reduce, MaxGradientGoesToTheFirstMaximum) {
  // Ties {2, 2, 1}: the whole upstream gradient goes to element 0.
  const Tensor x = f64({3}, {2, 2, 1});
  auto op = make_op(spec_of("ReduceMax", {x.desc()}, {{"keepdims", int64_t{0}}}));
  const std::vector<Tensor> in = {x};
  const auto out = op->run_forward(in);
  const std::vector<Tensor> gy = {f64({}, {3})};
  expect_values(op->run_backward(gy, in, out)[0], {3, 0, 0});
}

TEST(Reduce, Gradients) {
  const Tensor x = random_tensor(DType::f64, {2, 3, 4}, "reduce", 0.5, 2.5);
  for (const char* type : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"}) {
    for (int64_t keep : {0, 1}) {
      auto op =
          make_op(spec_of(type, {x.desc()}, {{"axes", std::vector<int64_t>{0, -1}}, {"keepdims", keep}}));
      expect_gradient_ok(*op, {x});
    }
    auto all = make_op(spec_of(type, {x.desc()}));
    expect_gradient_ok(*all, {x});
  }
}

TEST(Reduce, Errors) {
  const Tensor x = x23();
  const Tensor axes = i64({0});
  // The axes input must be known when the op is created.
  expect_invalid(spec_of("ReduceSum", {x.desc(), axes.desc()}), "constant");
  expect_invalid(spec_of("ReduceMean", {x.desc()}, {{"axes", std::vector<int64_t>{0, -2}}}),
                 "more than once");
  expect_invalid(spec_of("ReduceMax", {x.desc()}, {{"axes", std::vector<int64_t>{2}}}), "axes=2");
  expect_invalid(
      spec_of("ReduceL2", {x.desc(), axes.desc()}, {{"axes", std::vector<int64_t>{0}}}, {std::nullopt, axes}),
      "both");
  expect_invalid(spec_of("ReduceSum", {{DType::boolean, {2}}}), "dtype");
}

}  // namespace d5::test
