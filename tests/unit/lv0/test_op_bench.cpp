// bench_problem: every way a case ends, on tiny problems the reference backend runs in
// milliseconds, plus test-only backends that compute wrong results or refuse.
#include <gtest/gtest.h>

#include "deep500/core/backend.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/op_registry.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace {

// Delegates to the reference, then adds `offset` to output 0 or to the first input gradient.
class SkewedOp : public Operator {
 public:
  SkewedOp(std::unique_ptr<Operator> inner, double fwd, double bwd)
      : Operator(inner->spec(), inner->output_descs()), inner_(std::move(inner)), fwd_(fwd), bwd_(bwd) {}
  std::string implementation() const override { return "skewed"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    inner_->forward(in, out);
    out[0].set(0, out[0].get(0) + fwd_);
  }
  std::vector<bool> differentiable_inputs() const override { return inner_->differentiable_inputs(); }
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    inner_->backward(gy, in, out, gx);
    gx[0].set(0, gx[0].get(0) + bwd_);
  }
  double flops() const override { return inner_->flops(); }

 private:
  std::unique_ptr<Operator> inner_;
  double fwd_, bwd_;
};

void add_backend(const std::string& name) {
  BackendInfo b;
  b.name = name;
  b.description = "test only";
  register_backend(std::move(b));
}

void register_test_backends() {
  static const bool once = [] {
    reference::register_all();
    auto add = [](const std::string& backend, double fwd, double bwd) {
      add_backend(backend);
      OpRegistry::global().add({.op_type = "RNN", .backend = backend, .name = backend, .backward = true,
                                .create = [fwd, bwd](const OpSpec& s) -> OpCreateResult {
                                  return std::make_unique<SkewedOp>(OpRegistry::global().create(s, "reference"), fwd,
                                                                    bwd);
                                },
                                .notes = "test only: the reference, skewed"});
    };
    add("wrong-forward", 0.5, 0);
    add("wrong-backward", 0, 0.5);
    add("exact-copy", 0, 0);
    add_backend("refuses");
    OpRegistry::global().add({.op_type = "RNN", .backend = "refuses", .name = "picky", .backward = false,
                              .create = [](const OpSpec&) -> OpCreateResult { return std::string("ReLU cells not supported"); },
                              .notes = "test only: refuses everything"});
    return true;
  }();
  (void)once;
}

// A vanilla (ReLU) RNN: hidden 4, batch 2, 3 steps.
Problem tiny_rnn() {
  return parse_suite("hidden,batch,time_steps,type\n4,2,3,vanilla\n", "tiny.csv", "tiny-rnn", 5).at(0);
}

OpBenchOptions fast(BenchMode mode) {
  OpBenchOptions o;
  o.mode = mode;
  o.min_time = 1e-4;
  o.max_time = 0.05;
  o.peak_gflops = 100;
  return o;
}

const MetricRecord* metric(const CaseResult& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

TEST(OpBench, CheckModeTimesACorrectForward) {
  register_test_backends();
  ProblemContext ctx(tiny_rnn());
  const CaseResult c = bench_problem(ctx, "exact-copy", fast(BenchMode::Check));
  ASSERT_EQ(c.state, CaseState::Passed) << c.detail;
  EXPECT_EQ(c.name, "#1 vanilla_h4mb2t3");
  EXPECT_EQ(c.level, "L0");
  EXPECT_EQ(c.params["hidden"], 4);
  EXPECT_EQ(c.extra["implementation"], "skewed");
  EXPECT_EQ(c.extra["measured"], "forward");
  ASSERT_TRUE(c.outcome.has_value());
  EXPECT_GE(c.outcome->runs, 6);  // the fewest runs with a 95% CI
  ASSERT_FALSE(c.metrics.empty());
  EXPECT_EQ(c.metrics[0].name, "wall_time");
  ASSERT_TRUE(c.metrics[0].summary && c.metrics[0].summary->median_ci.available);
  for (const char* name : {"cpu_time", "cpu_utilization", "gflops", "peak_fraction", "gbps"})
    EXPECT_NE(metric(c, name), nullptr) << name;
  // Rates are work / time run by run: the median rate is the rate at the median time.
  const double flops = c.extra["flops"];
  const MetricRecord* g = metric(c, "gflops");
  ASSERT_EQ(g->samples.size(), c.metrics[0].samples.size());
  EXPECT_DOUBLE_EQ(g->samples[0], flops * 1e-9 / c.metrics[0].samples[0]);
  EXPECT_DOUBLE_EQ(metric(c, "peak_fraction")->samples[0], g->samples[0] / 100);
}

TEST(OpBench, GradModeTimesBackward) {
  register_test_backends();
  ProblemContext ctx(tiny_rnn());
  const CaseResult c = bench_problem(ctx, "reference", fast(BenchMode::Grad));
  ASSERT_EQ(c.state, CaseState::Passed) << c.detail;
  EXPECT_EQ(c.extra["measured"], "backward");
  EXPECT_EQ(c.extra["implementation"], "reference");
}

// A bf16 problem on the reference: its widened Gemm checks forward and backward against itself
// and says how it computes.
TEST(OpBench, Bfloat16ProblemsRunOnTheWidenedReference) {
  register_test_backends();
  ProblemContext ctx(in_dtype(parse_suite("m,n,k,a_t,b_t\n8,4,16,1,0\n", "g.csv", "tiny-gemm", 3).at(0), DType::bf16));
  const CaseResult c = bench_problem(ctx, "reference", fast(BenchMode::Grad));
  ASSERT_EQ(c.state, CaseState::Passed) << c.detail;
  EXPECT_NE(c.extra["implementation"].get<std::string>().find("widened to f32"), std::string::npos)
      << c.extra["implementation"];
  EXPECT_EQ(c.params["dtype"], "bf16");
}

TEST(OpBench, WrongResultsFailWithTheWorstElement) {
  register_test_backends();
  ProblemContext ctx(tiny_rnn());
  const CaseResult f = bench_problem(ctx, "wrong-forward", fast(BenchMode::Check));
  EXPECT_EQ(f.state, CaseState::Failed);
  EXPECT_NE(f.detail.find("output 0: 1 of 24 elements outside tolerance; worst element [0, 0, 0, 0]"),
            std::string::npos)
      << f.detail;
  EXPECT_TRUE(f.extra["check"].contains("outputs")) << f.extra.dump();
  EXPECT_FALSE(f.outcome.has_value());  // a wrong answer is not timed
  // Perf mode does not compare.
  EXPECT_EQ(bench_problem(ctx, "wrong-forward", fast(BenchMode::Perf)).state, CaseState::Passed);

  const CaseResult b = bench_problem(ctx, "wrong-backward", fast(BenchMode::Grad));
  EXPECT_EQ(b.state, CaseState::Failed);
  EXPECT_NE(b.detail.find("gradient of input 0: 1 of 24 elements outside tolerance"), std::string::npos) << b.detail;
  EXPECT_EQ(bench_problem(ctx, "wrong-backward", fast(BenchMode::Check)).state, CaseState::Passed);
}

TEST(OpBench, RefusalsMissingBackendsAndBudgetsAreStatesWithReasons) {
  register_test_backends();
  ProblemContext ctx(tiny_rnn());
  const CaseResult r = bench_problem(ctx, "refuses", fast(BenchMode::Perf));
  EXPECT_EQ(r.state, CaseState::Unimplemented);
  EXPECT_NE(r.detail.find("ReLU cells not supported"), std::string::npos) << r.detail;

  // A name no build of deep500 has is the caller's error, not a skipped case.
  EXPECT_THROW(bench_problem(ctx, "no-such-backend", fast(BenchMode::Perf)), InvalidArgument);

  OpBenchOptions small = fast(BenchMode::Grad);
  small.max_memory = ctx.problem().tensor_bytes;  // grad mode needs 4x
  const CaseResult s = bench_problem(ctx, "reference", small);
  EXPECT_EQ(s.state, CaseState::Skipped);
  EXPECT_NE(s.detail.find("--max-memory"), std::string::npos) << s.detail;
  small.mode = BenchMode::Perf;
  EXPECT_EQ(bench_problem(ctx, "reference", small).state, CaseState::Passed);

  Problem unknown = tiny_rnn();
  unknown.spec.type = "NoSuchOp";
  ProblemContext uctx(unknown);
  const CaseResult u = bench_problem(uctx, "reference", fast(BenchMode::Perf));
  EXPECT_EQ(u.state, CaseState::Unimplemented);
  EXPECT_NE(u.detail.find("not implemented by any backend"), std::string::npos) << u.detail;
}

TEST(OpBench, ToleranceGrowsWithTheReductionLength) {
  // f32: unit roundoff 2^-24; atol = max(default atol, 4 R u); rtol is default_tolerance()'s.
  EXPECT_DOUBLE_EQ(check_tolerance(DType::f32, "Gemm", 1000).atol, 4000 * 0x1p-24);
  EXPECT_DOUBLE_EQ(check_tolerance(DType::f32, "Gemm", 1000).rtol, default_tolerance(DType::f32, "Gemm").rtol);
  EXPECT_DOUBLE_EQ(check_tolerance(DType::f64, "Conv", 1e6).atol, 4e6 * 0x1p-53);
  // Short sums keep the default floor.
  EXPECT_DOUBLE_EQ(check_tolerance(DType::f32, "Gemm", 1).atol, default_tolerance(DType::f32, "Gemm").atol);
  EXPECT_EQ(parse_bench_mode("grad"), BenchMode::Grad);
  EXPECT_THROW(parse_bench_mode("fast"), InvalidArgument);
}

}  // namespace d5::test
