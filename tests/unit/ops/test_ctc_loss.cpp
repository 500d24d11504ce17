// CTCLoss (deep500) on the reference backend: losses against the sum over every alignment,
// enumerated path by path; closed forms of tiny cases with their gradients; finite differences;
// impossible targets; and the specs and inputs it refuses.
#include <cmath>
#include <limits>

#include "norm_test_util.h"

namespace d5::test {

namespace {

Tensor i64(const Shape& s, std::initializer_list<int64_t> v) { return Tensor::from_values<int64_t>(s, v); }
Tensor i32(const Shape& s, std::initializer_list<int32_t> v) { return Tensor::from_values<int32_t>(s, v); }

Attributes ctc_attrs(const std::string& reduction, int64_t blank = 0, int64_t zero_infinity = 0) {
  return {{"reduction", reduction}, {"blank", blank}, {"zero_infinity", zero_infinity}};
}

std::unique_ptr<Operator> ctc(const std::vector<Tensor>& in, Attributes a) {
  return make_op(spec_of("CTCLoss", descs(in), std::move(a)));
}

std::vector<double> ctc_values(const std::vector<Tensor>& in, Attributes a) {
  return values(ctc(in, std::move(a))->run_forward(in)[0]);
}

// Random scores [T, N, C] normalized over C: log-probabilities as a LogSoftmax gives them.
Tensor random_log_probs(DType t, const Shape& s, const std::string& name) {
  const Tensor x = random_tensor(DType::f64, s, name, -2, 2);
  Tensor lp(t, s);
  const int64_t c = s[2];
  for (int64_t row = 0; row < x.numel() / c; ++row) {
    double sum = 0;
    for (int64_t k = 0; k < c; ++k) sum += std::exp(x.get(row * c + k));
    for (int64_t k = 0; k < c; ++k) lp.set(row * c + k, x.get(row * c + k) - std::log(sum));
  }
  return lp;
}

// The oracle: -log of the summed probability of every sequence of `steps` classes that collapses
// (repeats merged, then blanks removed) to `labels`, each path's probability a product of exp(lp).
double every_alignment_nll(const Tensor& lp, int64_t n, int64_t steps, const std::vector<int64_t>& labels,
                           int64_t blank) {
  const int64_t batch = lp.shape()[1], c = lp.shape()[2];
  std::vector<int64_t> path(static_cast<size_t>(steps), 0);
  double p = 0;
  for (;;) {
    std::vector<int64_t> collapsed;
    double log_path = 0;
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t k = path[static_cast<size_t>(t)];
      if (k != blank && (t == 0 || k != path[static_cast<size_t>(t - 1)])) collapsed.push_back(k);
      log_path += lp.get((t * batch + n) * c + k);
    }
    if (collapsed == labels) p += std::exp(log_path);
    size_t t = 0;  // next path: count in base C
    while (t < path.size() && ++path[t] == c) path[t++] = 0;
    if (t == path.size()) break;
  }
  return -std::log(p);
}

}  // namespace

// Two cases small enough to enumerate (3^4 paths): a repeated label that needs a blank between
// its copies, a sample shorter than T, padding that is never read (a blank, then 2 and 2 beyond
// target_lengths), blank 0 and blank 2, int64 and int32 indices. Both sides sum in double: the
// op's log-sum-exp over at most 5 lattice cells per step against 81 products summed directly
// differ by a few ulps of losses of magnitude ~5, far under 1e-12.
TEST(CTCLoss, LossIsTheSumOverEveryAlignment) {
  const Tensor lp = random_log_probs(DType::f64, {4, 2, 3}, "ctc_brute");
  const std::vector<Tensor> in = {lp, i64({2, 2}, {1, 1, 2, 0}), i64({2}, {4, 3}), i64({2}, {2, 1})};
  const double l0 = every_alignment_nll(lp, 0, 4, {1, 1}, 0), l1 = every_alignment_nll(lp, 1, 3, {2}, 0);
  expect_values(ctc(in, ctc_attrs("none"))->run_forward(in)[0], {l0, l1});
  expect_values(ctc(in, ctc_attrs("sum"))->run_forward(in)[0], {l0 + l1});
  const Tensor mean = ctc(in, {})->run_forward(in)[0];  // "mean" is the default: per label, then per sample
  EXPECT_EQ(mean.shape(), Shape{});
  expect_values(mean, {(l0 / 2 + l1 / 1) / 2});

  const Tensor lp3 = random_log_probs(DType::f64, {4, 3, 3}, "ctc_brute_blank2");
  // With blank 2: {0, 1} over 4 steps; {1, 1} over 3, exactly the steps it needs (1, blank, 1
  // is its one alignment); an empty target over 2 steps (blank, blank).
  const std::vector<Tensor> in3 = {lp3, i32({3, 2}, {0, 1, 1, 1, 2, 2}), i32({3}, {4, 3, 2}), i32({3}, {2, 2, 0})};
  const double m0 = every_alignment_nll(lp3, 0, 4, {0, 1}, 2), m1 = every_alignment_nll(lp3, 1, 3, {1, 1}, 2),
               m2 = every_alignment_nll(lp3, 2, 2, {}, 2);
  expect_values(ctc(in3, ctc_attrs("none", 2))->run_forward(in3)[0], {m0, m1, m2});
  // The empty target's mean divides by max(0, 1) = 1.
  expect_values(ctc(in3, ctc_attrs("mean", 2))->run_forward(in3)[0], {(m0 / 2 + m1 / 2 + m2) / 3});
}

// f32 log_probs: the op sums in double and rounds the loss once, so it matches the oracle on the
// same f32 values to the output's rounding (losses ~5, ulp 5e-7) plus the f32 result of the
// reduction: 2e-6.
TEST(CTCLoss, F32MatchesTheOracleToItsRounding) {
  const Tensor lp = random_log_probs(DType::f32, {4, 2, 3}, "ctc_brute");
  const std::vector<Tensor> in = {lp, i64({2, 2}, {1, 1, 2, 0}), i64({2}, {4, 3}), i64({2}, {2, 1})};
  const double l0 = every_alignment_nll(lp, 0, 4, {1, 1}, 0), l1 = every_alignment_nll(lp, 1, 3, {2}, 0);
  const Tensor out = ctc(in, ctc_attrs("none"))->run_forward(in)[0];
  EXPECT_EQ(out.dtype(), DType::f32);
  expect_values(out, {l0, l1}, 2e-6);
  expect_values(ctc(in, ctc_attrs("sum"))->run_forward(in)[0], {l0 + l1}, 2e-6);
}

// Closed forms. Gradients are with upstream 1 and reduction "sum": d loss / d log_probs[t, c] is
// minus the share of p carried by the alignments at class c in step t (exact in double to 1e-12).
TEST(CTCLoss, HandDerivedValuesAndGradients) {
  const auto grad = [](const std::vector<Tensor>& in) {
    auto op = ctc(in, ctc_attrs("sum"));
    const auto out = op->run_forward(in);
    return op->run_backward(std::vector<Tensor>{f64({}, {1})}, in, out)[0];
  };
  // T = 1, target {1}: the one alignment is (1): loss -log 0.7; the gradient is -1 at (0, 1)
  // and 0 at the blank (torch's own backward would say exp(lp) - that = {0.3, -0.3}).
  const std::vector<Tensor> one = {f64({1, 1, 2}, {std::log(0.3), std::log(0.7)}), i64({1, 1}, {1}), i64({1}, {1}),
                                   i64({1}, {1})};
  expect_values(ctc(one, ctc_attrs("none"))->run_forward(one)[0], {-std::log(0.7)});
  expect_values(grad(one), {0, -1});

  // T = 2, uniform over 2 classes, target {1}: alignments (1,1), (0,1), (1,0), each 1/4, so
  // p = 3/4. At each step class 1 carries two of the three (-2/3), the blank one (-1/3).
  const double h = std::log(0.5);
  const std::vector<Tensor> two = {f64({2, 1, 2}, {h, h, h, h}), i64({1, 1}, {1}), i64({1}, {2}), i64({1}, {1})};
  expect_values(ctc(two, ctc_attrs("none"))->run_forward(two)[0], {std::log(4.0 / 3)});
  expect_values(grad(two), {-1.0 / 3, -2.0 / 3, -1.0 / 3, -2.0 / 3});

  // T = 3, target {1, 1}: the repeat needs the blank between, so (1, 0, 1) is the one alignment:
  // p = 1/8; each step's gradient is -1 on its class and exactly 0 on the other.
  const std::vector<Tensor> rep = {f64({3, 1, 2}, {h, h, h, h, h, h}), i64({1, 2}, {1, 1}), i64({1}, {3}),
                                   i64({1}, {2})};
  expect_values(ctc(rep, ctc_attrs("none"))->run_forward(rep)[0], {3 * std::log(2.0)});
  expect_values(grad(rep), {0, -1, -1, 0, 0, -1});

  // An empty target over 2 of 3 steps: only blanks, loss -(lp[0, 0] + lp[1, 0]); step 2 is past
  // the input length and gets no gradient. mean divides by max(0, 1) = 1.
  const Tensor lp = f64({3, 1, 2}, {-0.2, -1.7, -0.9, -0.5, -3.0, -0.1});
  const std::vector<Tensor> empty = {lp, i64({1, 1}, {1}), i64({1}, {2}), i64({1}, {0})};
  expect_values(ctc(empty, {})->run_forward(empty)[0], {0.2 + 0.9});
  expect_values(grad(empty), {-1, 0, -1, 0, 0, 0});
}

// The derivative is the one with respect to log_probs itself: for normalized log_probs every
// alignment visits exactly one class per step, so the gradient sums to -1 over the classes of
// each step inside the input length and is 0 after it. torch's own backward (exp(lp) more) sums
// to 0 instead. Sums of 3 terms of magnitude <= 1: 1e-12.
TEST(CTCLoss, GradientSumsToMinusOnePerStep) {
  const Tensor lp = random_log_probs(DType::f64, {5, 2, 3}, "ctc_rows");
  const std::vector<Tensor> in = {lp, i64({2, 2}, {1, 2, 2, 2}), i64({2}, {5, 3}), i64({2}, {2, 2})};
  auto op = ctc(in, ctc_attrs("sum"));
  const auto out = op->run_forward(in);
  const Tensor g = op->run_backward(std::vector<Tensor>{f64({}, {1})}, in, out)[0];
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t n = 0; n < 2; ++n) {
      double sum = 0;
      for (int64_t c = 0; c < 3; ++c) sum += g.get((t * 2 + n) * 3 + c);
      EXPECT_NEAR(sum, t < (n == 0 ? 5 : 3) ? -1.0 : 0.0, 1e-12) << "t " << t << " n " << n;
    }
}

// Finite differences (test_gradient: Richardson-extrapolated central differences, f64, rtol
// 1e-5) for every reduction, blank 0 and 3, unnormalized log_probs, samples shorter than T, and
// an impossible sample under zero_infinity (its gradient is 0, as its loss is constant 0).
TEST(CTCLoss, GradientMatchesFiniteDifferences) {
  const Tensor lp = random_tensor(DType::f64, {5, 3, 4}, "ctc_fd", -3, 0);
  const std::vector<Tensor> blank0 = {lp, i64({3, 3}, {1, 1, 2, 3, 2, 0, 2, 0, 0}), i64({3}, {5, 4, 3}),
                                      i64({3}, {3, 2, 1})};
  const std::vector<Tensor> blank3 = {lp, i32({3, 3}, {0, 0, 1, 2, 1, 3, 1, 3, 3}), i32({3}, {5, 2, 4}),
                                      i32({3}, {3, 2, 1})};
  const std::vector<Tensor> impossible = {lp, i64({3, 3}, {1, 1, 2, 3, 3, 3, 2, 0, 0}), i64({3}, {5, 4, 3}),
                                          i64({3}, {3, 3, 1})};  // {3, 3, 3} needs 5 steps
  for (const char* r : {"none", "sum", "mean"}) {
    auto op = ctc(blank0, ctc_attrs(r));
    EXPECT_EQ(op->differentiable_inputs(), (std::vector<bool>{true, false, false, false}));
    expect_gradient_ok(*op, blank0);
    expect_gradient_ok(*ctc(blank3, ctc_attrs(r, 3)), blank3);
    expect_gradient_ok(*ctc(impossible, ctc_attrs(r, 0, 1)), impossible);
  }
}

// p = 0 when the input is shorter than the target needs: loss +inf, or 0 with zero_infinity=1.
// The gradient follows torch: NaN on the impossible sample's steps without zero_infinity, 0 with
// it; the possible sample is unaffected either way.
TEST(CTCLoss, ImpossibleTargetsAreInfiniteOrZeroed) {
  const Tensor lp = random_log_probs(DType::f64, {3, 2, 3}, "ctc_inf");
  // Sample 0: {1, 1} in 2 steps (needs 3). Sample 1: {2} in 3 steps.
  const std::vector<Tensor> in = {lp, i64({2, 2}, {1, 1, 2, 0}), i64({2}, {2, 3}), i64({2}, {2, 1})};
  const double l1 = every_alignment_nll(lp, 1, 3, {2}, 0);
  const double inf = std::numeric_limits<double>::infinity();
  const auto none = ctc_values(in, ctc_attrs("none"));
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0], inf);
  EXPECT_NEAR(none[1], l1, 1e-12);
  expect_values(ctc(in, ctc_attrs("none", 0, 1))->run_forward(in)[0], {0, l1});
  EXPECT_EQ(ctc_values(in, ctc_attrs("sum")), std::vector<double>{inf});
  EXPECT_EQ(ctc_values(in, ctc_attrs("mean")), std::vector<double>{inf});
  expect_values(ctc(in, ctc_attrs("mean", 0, 1))->run_forward(in)[0], {(0.0 / 2 + l1 / 1) / 2});

  const Tensor up = f64({2}, {1, 1});
  for (const int64_t zero_infinity : {0, 1}) {
    auto op = ctc(in, ctc_attrs("none", 0, zero_infinity));
    const auto out = op->run_forward(in);
    const Tensor g = op->run_backward(std::vector<Tensor>{up}, in, out)[0];
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 3; ++c) {
        const double g0 = g.get((t * 2 + 0) * 3 + c), g1 = g.get((t * 2 + 1) * 3 + c);
        if (zero_infinity || t >= 2)
          EXPECT_EQ(g0, 0.0) << "t " << t << " c " << c;
        else
          EXPECT_TRUE(std::isnan(g0)) << "t " << t << " c " << c;
        EXPECT_TRUE(std::isfinite(g1)) << "t " << t << " c " << c;
      }
  }
}

TEST(CTCLoss, RefusesBadSpecs) {
  const auto f = DType::f32, l = DType::i64;
  const auto spec = [](std::vector<TensorDesc> d, Attributes a = {}) {
    return spec_of("CTCLoss", std::move(d), std::move(a));
  };
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}}), "4 inputs");
  expect_invalid(spec({{f, {5, 8}}, {l, {2, 3}}, {l, {2}}, {l, {2}}}), "[T, N, C]");
  expect_invalid(spec({{DType::i32, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}, {l, {2}}}), "dtype i32");
  expect_invalid(spec({{f, {5, 2, 4}}, {f, {2, 3}}, {l, {2}}, {l, {2}}}), "targets");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {3, 3}}, {l, {2}}, {l, {2}}}), "N = 2");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {6}}, {l, {2}}, {l, {2}}}), "targets");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {3}}, {l, {2}}}), "input_lengths");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}, {DType::f32, {2}}}), "target_lengths");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}, {l, {2}}}, {{"blank", int64_t{4}}}), "blank=4");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}, {l, {2}}}, {{"blank", int64_t{-1}}}), "blank=-1");
  expect_invalid(spec({{f, {5, 2, 4}}, {l, {2, 3}}, {l, {2}}, {l, {2}}}, {{"reduction", std::string("avg")}}), "avg");
}

// Lengths and labels are data: checked when the op runs, naming the sample and position.
TEST(CTCLoss, RefusesBadLengthsAndLabels) {
  const Tensor lp = random_log_probs(DType::f64, {3, 2, 3}, "ctc_bad");
  const auto run = [&](const Tensor& targets, const Tensor& il, const Tensor& tl, int64_t blank = 0) {
    const std::vector<Tensor> in = {lp, targets, il, tl};
    ctc(in, ctc_attrs("mean", blank))->run_forward(in);
  };
  const Tensor ok_t = i64({2, 2}, {1, 2, 2, 0}), ok_il = i64({2}, {3, 3}), ok_tl = i64({2}, {2, 1});
  run(ok_t, ok_il, ok_tl);  // the baseline runs
  const auto refused = [](const std::function<void()>& f, const std::string& needle) {
    expect_throw_naming<InvalidArgument>(f, "CTCLoss", needle);
  };
  refused([&] { run(ok_t, i64({2}, {3, 0}), ok_tl); }, "input_lengths[1] = 0");
  refused([&] { run(ok_t, i64({2}, {4, 3}), ok_tl); }, "input_lengths[0] = 4 is outside [1, 3]");
  refused([&] { run(ok_t, ok_il, i64({2}, {3, 1})); }, "target_lengths[0] = 3 is outside [0, 2]");
  refused([&] { run(ok_t, ok_il, i32({2}, {2, -1})); }, "target_lengths[1] = -1");
  refused([&] { run(i64({2, 2}, {1, 0, 2, 0}), ok_il, ok_tl); }, "targets[0, 1] = 0");  // the blank
  refused([&] { run(i64({2, 2}, {1, 2, 3, 0}), ok_il, ok_tl); }, "targets[1, 0] = 3");
  refused([&] { run(i32({2, 2}, {-1, 2, 2, 0}), ok_il, ok_tl); }, "targets[0, 0] = -1");
  refused([&] { run(ok_t, ok_il, ok_tl, 2); }, "other than blank (2)");
}

}  // namespace d5::test
