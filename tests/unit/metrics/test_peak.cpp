// Peak measurement: every usable FMA kernel lands in a sanity band, the triad moves data, and
// the machine peak is measured once per process.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>

#include "deep500/core/error.h"
#include "deep500/metrics/peak.h"

namespace d5::test {

namespace {

PeakSettings quick() {
  PeakSettings s;
  s.run_seconds = 0.001;
  s.max_seconds = 0.05;
  s.warmup_seconds = 0.01;
  return s;
}

// An upper bound no correct measurement can exceed: clock x threads x lanes x 2 flops per FMA x
// 2 FMA units per core. No x86 core issues more than two vector FMAs per cycle (Intel's server
// cores have two FMA ports, AMD Zen 2-5 two FMA pipes; SSE2's multiply+add pairs are bound by
// the same two multiply pipes). The clock is cpu_info().max_mhz, which inside VMs is the nominal
// "cpu MHz" the kernel reports, below the turbo clock: a factor 2 covers every shipping turbo
// ratio. Unknown clocks count as 6 GHz, faster than any shipping core.
double theoretical_bound_gflops(FmaIsa isa, int threads) {
  const CpuInfo& cpu = cpu_info();
  const double ghz = cpu.max_mhz > 0 ? cpu.max_mhz / 1000 : 6.0;
  const int cores = std::min(threads, std::max(1, cpu.logical_cores));
  return ghz * 2 * cores * f32_lanes(isa) * 2 * 2;
}

}  // namespace

TEST(Peak, UsableKernelsFollowTheCpuIsa) {
  CpuInfo cpu;
  const auto none = usable_fma_isas(cpu);
  ASSERT_FALSE(none.empty());
  EXPECT_EQ(none.back(), FmaIsa::Scalar);
  cpu.isa = {"avx", "avx2", "fma", "avx512f"};
  const auto all = usable_fma_isas(cpu);
#if defined(__x86_64__)
  EXPECT_EQ(all, (std::vector<FmaIsa>{FmaIsa::Avx512f, FmaIsa::Avx2Fma, FmaIsa::Sse2, FmaIsa::Scalar}));
  cpu.isa = {"avx", "avx2"};  // no FMA: the 256-bit kernel needs both
  EXPECT_EQ(usable_fma_isas(cpu), (std::vector<FmaIsa>{FmaIsa::Sse2, FmaIsa::Scalar}));
#else
  EXPECT_EQ(all, (std::vector<FmaIsa>{FmaIsa::Scalar}));
#endif
}

TEST(Peak, EveryUsableKernelIsWithinTheSanityBand) {
  for (FmaIsa isa : usable_fma_isas()) {
    for (int threads : {1, std::max(1, omp_get_max_threads())}) {
      const PeakMeasurement m = measure_fma_peak(isa, threads, quick());
      SCOPED_TRACE(std::string(to_string(isa)) + " x" + std::to_string(threads));
      EXPECT_EQ(m.unit, "GFLOP/s");
      EXPECT_EQ(m.isa, to_string(isa));
      EXPECT_GE(m.outcome.runs, 10);
      EXPECT_EQ(m.samples.size(), static_cast<size_t>(m.outcome.runs));
      // 0.5 GFLOP/s: even a scalar kernel on a 1 GHz core manages 2 flops per cycle unless it is
      // broken. The best run, since only a slowdown of every run can push that down.
      EXPECT_GT(m.summary.max, 0.5);
      EXPECT_LT(m.summary.max, theoretical_bound_gflops(isa, threads));
      EXPECT_TRUE(m.summary.median_ci.available);
    }
  }
}

TEST(Peak, TriadMovesData) {
  PeakSettings s = quick();
  s.triad_array_bytes = 8 << 20;
  const PeakMeasurement m = measure_triad_bandwidth(1, s);
  EXPECT_EQ(m.unit, "GB/s");
  EXPECT_DOUBLE_EQ(m.work_per_run, 3.0 * (8 << 20));
  EXPECT_GT(m.summary.max, 0.1);       // the best run: load slows some runs, not all
  EXPECT_LT(m.summary.median, 10000);  // 10 TB/s from one thread would mean the loop was skipped
  EXPECT_THROW(measure_triad_bandwidth(0, s), InvalidArgument);
}

TEST(Peak, MachinePeakIsMeasuredOncePerProcess) {
  const MachinePeak& a = machine_peak();
  const MachinePeak& b = machine_peak();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.isa, usable_fma_isas().front());
  EXPECT_EQ(a.fma_all_threads.name, "fma_all_threads");
  // The figure d5 ops bench divides by is the one machine_peak() holds, not a second measurement.
  EXPECT_EQ(machine_fma_peak().samples, a.fma_all_threads.samples);
  EXPECT_EQ(fma_peak_json(machine_fma_peak())["fma_gflops"], to_json(a)["fma_gflops"]);
  EXPECT_EQ(a.fma_one_thread.threads, 1);
  // Fractions divide by the best all-thread run: never below the median.
  EXPECT_DOUBLE_EQ(peak_gflops(a), a.fma_all_threads.summary.max);
  EXPECT_GE(peak_gflops(a), a.fma_all_threads.summary.median);
  EXPECT_GE(a.triad.info["array_bytes"].get<int64_t>(), int64_t{64} << 20);
  const auto j = to_json(a);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_GT(j["fma_gflops"]["median"].get<double>(), 0);
  EXPECT_TRUE(j["fma_gflops"]["ci_95"].is_array());
  EXPECT_DOUBLE_EQ(j["fma_gflops"]["best"].get<double>(), peak_gflops(a));
  EXPECT_GT(j["triad_gbps"]["median"].get<double>(), 0);
  const CaseResult c = to_case(a.triad);
  EXPECT_EQ(c.metrics.at(0).unit, "GB/s");
  EXPECT_EQ(c.metrics.at(0).samples.size(), a.triad.samples.size());
}

}  // namespace d5::test
