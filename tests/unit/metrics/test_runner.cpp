#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/core/tensor.h"

namespace d5 {

namespace {
// A metric whose samples the test controls, so the stopping rule can be checked exactly.
class ScriptedMetric : public Metric {
 public:
  explicit ScriptedMetric(std::function<double(int)> f, int reruns = 0) : f_(std::move(f)), reruns_(reruns) {}
  std::string name() const override { return "scripted"; }
  std::string unit() const override { return "s"; }
  int reruns() const override { return reruns_; }
  void end() override { add_sample(f_(i_++)); }

 private:
  std::function<double(int)> f_;
  int reruns_;
  int i_ = 0;
};

MetricSet scripted(std::function<double(int)> f, int reruns = 0) {
  MetricSet m;
  m.add(std::make_unique<ScriptedMetric>(std::move(f), reruns));
  return m;
}
}  // namespace

TEST(Runner, ConstantSamplesStopAtMinRuns) {
  auto m = scripted([](int) { return 1.0; });
  int calls = 0;
  RunSettings s;
  s.warmup_runs = 3;
  s.min_runs = 10;
  const auto out = run_measured([&] { ++calls; }, m, s);
  EXPECT_EQ(out.validity, Validity::Valid);
  EXPECT_EQ(out.runs, 10);
  EXPECT_EQ(out.warmup_runs, 3);
  EXPECT_EQ(calls, 13);
  EXPECT_EQ(m[0].samples().size(), 10u);  // warm-up runs are not measured
  EXPECT_EQ(out.ci_ratio, 0.0);
}

TEST(Runner, NoisySamplesHitTheRunLimitAndAreInvalid) {
  RngStream rng(1, "noise");
  auto m = scripted([&](int) { return 1.0 + rng.uniform(); });  // CI of a U(1,2) median is wide
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = 10;
  s.max_runs = 20;
  s.target_ci_ratio = 0.001;
  const auto out = run_measured([] {}, m, s);
  EXPECT_EQ(out.validity, Validity::Invalid);
  EXPECT_EQ(out.runs, 20);
  EXPECT_GT(out.ci_ratio, 0.001);
  EXPECT_NE(out.reason.find("run limit"), std::string::npos) << out.reason;
}

TEST(Runner, NoiseShrinksUntilTarget) {
  // Samples 1 + u/sqrt(k): the CI narrows as runs accumulate, so the runner must continue past
  // min_runs and stop once the ±5% target is met, well before max_runs.
  RngStream rng(2, "shrink");
  auto m = scripted([&](int k) { return 1.0 + rng.uniform() * 0.5 / std::sqrt(k + 1.0); });
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = 6;
  s.max_runs = 10000;
  s.target_ci_ratio = 0.05;
  const auto out = run_measured([] {}, m, s);
  EXPECT_EQ(out.validity, Validity::Valid) << out.reason;
  EXPECT_GT(out.runs, 6);
  EXPECT_LT(out.runs, 10000);
  EXPECT_LE(out.ci_ratio, 0.05);
  EXPECT_NEAR(ci_half_width_ratio(m[0].samples(), 0.95), out.ci_ratio, 1e-15);
}

TEST(Runner, TimeLimitIsReported) {
  auto m = scripted([](int k) { return k % 2 ? 1.0 : 3.0; });  // never converges
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = 2;
  s.max_runs = 1000000;
  s.max_seconds = 0.05;
  const auto out = run_measured([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, m, s);
  EXPECT_EQ(out.validity, Validity::Invalid);
  EXPECT_NE(out.reason.find("time limit"), std::string::npos) << out.reason;
  EXPECT_GE(out.seconds, 0.05);
  EXPECT_LT(out.seconds, 1.0);
}

TEST(Runner, TooFewSamplesForACiSaySo) {
  auto m = scripted([](int k) { return 1.0 + k; });
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = 3;
  s.max_runs = 3;
  const auto out = run_measured([] {}, m, s);
  EXPECT_EQ(out.validity, Validity::Invalid);
  EXPECT_TRUE(std::isinf(out.ci_ratio));
  EXPECT_NE(out.reason.find("no 95% CI"), std::string::npos) << out.reason;
}

TEST(Runner, MetricRerunsRaiseMinRuns) {
  auto m = scripted([](int) { return 1.0; }, 25);
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = 5;
  s.max_runs = 10;
  EXPECT_EQ(run_measured([] {}, m, s).runs, 25);
}

TEST(Runner, RejectsInconsistentSettings) {
  auto m = scripted([](int) { return 1.0; });
  RunSettings s;
  s.min_runs = 10;
  s.max_runs = 5;
  EXPECT_THROW(run_measured([] {}, m, s), InvalidArgument);
  MetricSet empty;
  EXPECT_THROW(run_measured([] {}, empty, {}), InvalidArgument);
}

TEST(StandardMetrics, WallTimeMeasuresASleep) {
  MetricSet m;
  m.add(std::make_unique<WallTime>());
  for (int i = 0; i < 3; ++i) {
    m.begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m.end();
  }
  for (double v : m[0].samples()) {
    EXPECT_GE(v, 0.020);  // sleep_for never returns early
    EXPECT_LT(v, 0.5);    // generous: a loaded 2-core machine can delay wake-up
  }
  EXPECT_EQ(m.results()[0].info["clock"], "wall");
}

TEST(StandardMetrics, CpuTimeAndUtilizationOfABusyAndAnIdleThread) {
  MetricSet m;
  m.add(std::make_unique<CpuTime>()).add(std::make_unique<Utilization>(1)).add(std::make_unique<WallTime>());
  // Spin until this process has burnt 50 ms of CPU, however loaded the machine is.
  m.begin();
  volatile double x = 0;
  const int64_t cpu_until = process_cpu_now_ns() + 50'000'000;
  while (process_cpu_now_ns() < cpu_until) x = x + 1;
  m.end();
  m.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  m.end();
  const auto cpu = m[0].samples();
  const auto util = m[1].samples();
  const auto wall = m[2].samples();
  EXPECT_GE(cpu[0], 0.050);
  EXPECT_LT(cpu[1], 0.01);  // sleeping burns (almost) no CPU
  // Utilization is cpu / (wall * threads); the three metrics read their clocks microseconds
  // apart, so the ratio matches to within 10% even if a preemption falls between the reads.
  EXPECT_NEAR(util[0], cpu[0] / wall[0], 0.10 * cpu[0] / wall[0]);
  EXPECT_LT(util[1], 0.2);
  EXPECT_GT(util[0], util[1]);
}

TEST(StandardMetrics, TensorPeakMemorySeesTemporaryAllocations) {
  MetricSet m;
  m.add(std::make_unique<TensorPeakMemory>());
  m.begin();
  { Tensor t(DType::f32, Shape{1 << 20}); }  // 4 MiB, freed before end()
  m.end();
  EXPECT_GE(m[0].samples()[0], 4.0 * (1 << 20));
}

TEST(StandardMetrics, EnergyIsEitherMeasuredOrUnavailableNeverZero) {
  Energy e;
  e.begin();
  volatile double x = 0;
  for (int i = 0; i < 1000000; ++i) x = x + i;
  e.end();
  const auto r = e.result();
  if (r.available) {
    ASSERT_EQ(r.samples.size(), 1u);
    EXPECT_GT(r.samples[0], 0.0);
  } else {
    EXPECT_TRUE(r.samples.empty());
    EXPECT_FALSE(r.unavailable_reason.empty());
  }
}

TEST(MetricSet, PrimaryMetricIsInnermost) {
  std::vector<std::string> order;
  struct Probe : Metric {
    std::string n;
    std::vector<std::string>* log;
    Probe(std::string name, std::vector<std::string>* l) : n(std::move(name)), log(l) {}
    std::string name() const override { return n; }
    std::string unit() const override { return ""; }
    void begin() override { log->push_back("begin " + n); }
    void end() override { log->push_back("end " + n); }
  };
  MetricSet m;
  m.add(std::make_unique<Probe>("primary", &order)).add(std::make_unique<Probe>("other", &order));
  m.begin();
  m.end();
  EXPECT_EQ(order, (std::vector<std::string>{"begin other", "begin primary", "end primary", "end other"}));
  EXPECT_THROW(m.add(std::make_unique<Probe>("other", &order)), InvalidArgument);
}

}  // namespace d5
