// Peak FMA rate and memory bandwidth, measured. The FMA kernels keep many independent
// accumulator chains in registers, so the loop is bound by the FMA units' throughput rather than
// their latency (4-5 cycles on current x86 cores, two units: at least 8-10 chains in flight).
#include "deep500/metrics/peak.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define D5_PEAK_X86 1
#endif

namespace d5 {

namespace {

// The kernels' operands. They are read through volatiles, so the compiler cannot evaluate the
// chains at compile time: with constants it folds the whole loop away (x * m + a with m just
// below 1 reaches a fixed point, which GCC proves). x * m + a with these values neither
// overflows nor reaches denormals, which would slow some cores down.
volatile float g_mul = 0.9999999f, g_add = 1e-7f, g_init = 1.0f;

struct Operands {
  float mul, add, init;
};
Operands operands() { return {g_mul, g_add, g_init}; }

#ifdef D5_PEAK_X86
// 16 zmm accumulators + 2 constants fit AVX-512's 32 registers.
constexpr int kChains512 = 16;
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters, Operands op) {
  __m512 acc[kChains512];
  for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_set1_ps(op.init + 0.01f * static_cast<float>(c));
  const __m512 m = _mm512_set1_ps(op.mul), a = _mm512_set1_ps(op.add);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains512; ++c) sum = _mm512_add_ps(sum, acc[c]);
  // Stored and summed rather than _mm512_reduce_add_ps, which trips GCC 12's
  // -Wuninitialized inside its own header.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// 12 ymm accumulators + 2 constants stay within AVX2's 16 registers (16 chains would spill).
constexpr int kChains256 = 12;
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters, Operands op) {
  __m256 acc[kChains256];
  for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_set1_ps(op.init + 0.01f * static_cast<float>(c));
  const __m256 m = _mm256_set1_ps(op.mul), a = _mm256_set1_ps(op.add);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains256; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// SSE2 has no FMA: a multiply and an add per lane, still two flops. 12 chains + 2 constants
// fit its 16 registers; a mul+add chain is ~7 cycles long, so 12 keep both ports busy.
constexpr int kChains128 = 12;
__attribute__((target("sse2"))) float fma_sse2(int64_t iters, Operands op) {
  __m128 acc[kChains128];
  for (int c = 0; c < kChains128; ++c) acc[c] = _mm_set1_ps(op.init + 0.01f * static_cast<float>(c));
  const __m128 m = _mm_set1_ps(op.mul), a = _mm_set1_ps(op.add);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains128; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], m), a);
  }
  __m128 sum = acc[0];
  for (int c = 1; c < kChains128; ++c) sum = _mm_add_ps(sum, acc[c]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

// Portable fallback (the only kernel off x86). The compiler may vectorize it; the flop count
// below assumes one lane, so the figure is then an underestimate, never an overestimate.
constexpr int kChainsScalar = 8;
float fma_scalar(int64_t iters, Operands op) {
  float acc[kChainsScalar];
  for (int c = 0; c < kChainsScalar; ++c) acc[c] = op.init + 0.01f * static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i)
    for (float& x : acc) x = x * op.mul + op.add;
  float r = 0;
  for (float x : acc) r += x;
  return r;
}

float run_kernel(FmaIsa isa, int64_t iters) {
  const Operands op = operands();
  switch (isa) {
#ifdef D5_PEAK_X86
    case FmaIsa::Avx512f: return fma_avx512(iters, op);
    case FmaIsa::Avx2Fma: return fma_avx2(iters, op);
    case FmaIsa::Sse2: return fma_sse2(iters, op);
#else
    case FmaIsa::Avx512f:
    case FmaIsa::Avx2Fma:
    case FmaIsa::Sse2: D5_THROW(Internal, "FMA kernel {} is not compiled on this architecture", to_string(isa));
#endif
    case FmaIsa::Scalar: return fma_scalar(iters, op);
  }
  D5_THROW(Internal, "unknown FMA kernel {}", static_cast<int>(isa));
}

RunSettings peak_run_settings(const PeakSettings& s) {
  RunSettings r;
  r.warmup_runs = 2;
  r.warmup_seconds = s.warmup_seconds;
  r.min_runs = 10;
  r.max_runs = 100000;
  r.max_seconds = s.max_seconds;
  r.target_ci_ratio = 0.01;
  return r;
}

// A rate the workload computes itself, as the runner's primary metric.
class ReportedRate : public Metric {
 public:
  explicit ReportedRate(const double* rate) : rate_(rate) {}
  std::string name() const override { return "rate"; }
  std::string unit() const override { return "1e9/s"; }
  void end() override { add_sample(*rate_); }

 private:
  const double* rate_;
};


}  // namespace

void measure_rate(PeakMeasurement& m, const std::function<void()>& workload, const PeakSettings& s,
                  const double* rate) {
  MetricSet metrics;
  if (rate) metrics.add(std::make_unique<ReportedRate>(rate));
  metrics.add(std::make_unique<WallTime>());
  m.outcome = run_measured(workload, metrics, peak_run_settings(s));
  if (rate) {
    m.samples = metrics[0].samples();
  } else {
    for (double t : metrics[0].samples()) m.samples.push_back(m.work_per_run / t * 1e-9);
  }
  m.summary = summarize(m.samples);
}

const char* to_string(FmaIsa isa) {
  switch (isa) {
    case FmaIsa::Avx512f: return "avx512f";
    case FmaIsa::Avx2Fma: return "avx2+fma";
    case FmaIsa::Sse2: return "sse2";
    case FmaIsa::Scalar: return "scalar";
  }
  return "?";
}

int f32_lanes(FmaIsa isa) {
  switch (isa) {
    case FmaIsa::Avx512f: return 16;
    case FmaIsa::Avx2Fma: return 8;
    case FmaIsa::Sse2: return 4;
    case FmaIsa::Scalar: return 1;
  }
  return 1;
}

int independent_chains(FmaIsa isa) {
#ifdef D5_PEAK_X86
  switch (isa) {
    case FmaIsa::Avx512f: return kChains512;
    case FmaIsa::Avx2Fma: return kChains256;
    case FmaIsa::Sse2: return kChains128;
    case FmaIsa::Scalar: return kChainsScalar;
  }
#else
  (void)isa;
#endif
  return kChainsScalar;
}

std::vector<FmaIsa> usable_fma_isas(const CpuInfo& cpu) {
  std::vector<FmaIsa> out;
#ifdef D5_PEAK_X86
  if (cpu.has("avx512f")) out.push_back(FmaIsa::Avx512f);
  if (cpu.has("avx2") && cpu.has("fma")) out.push_back(FmaIsa::Avx2Fma);
  out.push_back(FmaIsa::Sse2);  // part of every x86-64 CPU
#else
  (void)cpu;
#endif
  out.push_back(FmaIsa::Scalar);
  return out;
}

PeakMeasurement measure_fma_peak(FmaIsa isa, int threads, const PeakSettings& s) {
  const auto usable = usable_fma_isas();
  D5_CHECK_ARG(std::find(usable.begin(), usable.end(), isa) != usable.end(),
               "FMA kernel {} cannot run on this CPU (usable ISA per cpuid/XCR0)", to_string(isa));
  D5_CHECK_ARG(threads >= 1, "FMA peak: threads must be >= 1, got {}", threads);
  D5_CHECK_ARG(s.run_seconds > 0, "FMA peak: run_seconds must be positive");
  PeakMeasurement m;
  m.name = threads == 1 ? "fma_one_thread" : "fma_all_threads";
  m.unit = "GFLOP/s";
  m.isa = to_string(isa);
  m.threads = threads;
  const double flops_per_iter = 2.0 * f32_lanes(isa) * independent_chains(isa);

  // Each thread times its own loop and the run's rate is the sum of the threads' rates. Timing
  // the parallel region instead would charge every thread for the slowest one's late start: on a
  // host where other work preempts one thread now and then, the region's time measures the
  // scheduler, not the FMA units. On an idle host both agree.
  volatile float sink = 0;
  double rate = 0;
  auto run = [&](int64_t iters) {
    float total = 0;
    double sum = 0;
    const double flops = flops_per_iter * static_cast<double>(iters);
#pragma omp parallel num_threads(threads) reduction(+ : total, sum)
    {
      const int64_t t0 = wall_now_ns();
      total += run_kernel(isa, iters);
      sum += flops / static_cast<double>(std::max<int64_t>(1, wall_now_ns() - t0));  // flops per ns = 1e9/s
    }
    sink = sink + total;
    rate = sum;
  };
  // Calibrate the iteration count to runs of about run_seconds on the calling thread alone, from
  // the fastest of three runs: a single run may be preempted or catch the clock ramping up, and a
  // parallel region's time includes waiting for its slowest thread. Every thread then does the
  // same work, which ideally takes the same time.
  int64_t iters = 1024;
  while (true) {
    double dt = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const int64_t t0 = wall_now_ns();
      sink = sink + run_kernel(isa, iters);
      dt = std::min(dt, static_cast<double>(wall_now_ns() - t0) * 1e-9);
    }
    if (dt >= s.run_seconds / 4 || iters > (int64_t{1} << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * s.run_seconds / dt));
      break;
    }
    iters *= 4;
  }
  m.work_per_run = flops_per_iter * static_cast<double>(iters) * threads;
  m.info = {{"lanes_f32", f32_lanes(isa)}, {"chains", independent_chains(isa)}, {"iterations", iters},
            {"flops_per_run", m.work_per_run}};
  m.info["rate"] = "sum over threads of each thread's own flops / seconds";
  measure_rate(m, [&] { run(iters); }, s, &rate);
  return m;
}

PeakMeasurement measure_triad_bandwidth(int threads, const PeakSettings& s) {
  D5_CHECK_ARG(threads >= 1, "triad bandwidth: threads must be >= 1, got {}", threads);
  const CpuInfo& cpu = cpu_info();
  int64_t bytes = s.triad_array_bytes;
  if (bytes <= 0) {
    int64_t llc = 0;
    for (const auto& c : cpu.caches) llc = std::max(llc, c.size_bytes);
    bytes = std::max<int64_t>(int64_t{64} << 20, 4 * llc * std::max(1, cpu.sockets));
    // Three arrays within an eighth of the memory, so the measurement never pushes the host to swap.
    if (cpu.memory_bytes > 0) bytes = std::min(bytes, cpu.memory_bytes / 24);
  }
  const int64_t n = std::max<int64_t>(1024, bytes / static_cast<int64_t>(sizeof(double)));

  // new[] leaves the pages untouched, so the parallel first touch below places each thread's
  // part on its own NUMA node, as the measured loop will access it.
  std::unique_ptr<double[]> a(new double[static_cast<size_t>(n)]), b(new double[static_cast<size_t>(n)]),
      c(new double[static_cast<size_t>(n)]);
  double* pa = a.get();
  const double* pb = b.get();
  const double* pc = c.get();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  const double scalar = 3;

  PeakMeasurement m;
  m.name = "triad";
  m.unit = "GB/s";
  m.isa = "compiler";
  m.threads = threads;
  m.work_per_run = 3.0 * sizeof(double) * static_cast<double>(n);
  m.info = {{"array_bytes", n * static_cast<int64_t>(sizeof(double))}, {"elements", n},
            {"bytes_counted_per_element", 3 * sizeof(double)},
            {"note", "write-allocate traffic is not counted, as in STREAM"}};
  measure_rate(m,
               [&] {
#pragma omp parallel for schedule(static) num_threads(threads)
                 for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + scalar * pc[i];
               },
               s);
  return m;
}

MachinePeak measure_machine_peak(FmaIsa isa, int threads, const PeakSettings& s) {
  MachinePeak p;
  p.isa = isa;
  p.fma_all_threads = measure_fma_peak(isa, threads, s);
  p.fma_all_threads.name = "fma_all_threads";  // also when the machine has one thread
  p.fma_one_thread = measure_fma_peak(isa, 1, s);
  p.triad = measure_triad_bandwidth(threads, s);
  return p;
}

namespace {
int peak_threads() { return std::max(1, omp_get_max_threads()); }
}  // namespace

const PeakMeasurement& machine_fma_peak() {
  static const PeakMeasurement fma = [] {
    PeakMeasurement m = measure_fma_peak(usable_fma_isas().front(), peak_threads());
    m.name = "fma_all_threads";
    return m;
  }();
  return fma;
}

const MachinePeak& machine_peak() {
  static const MachinePeak peak = [] {
    MachinePeak p;
    p.isa = usable_fma_isas().front();
    p.fma_all_threads = machine_fma_peak();
    p.fma_one_thread = measure_fma_peak(p.isa, 1);
    p.triad = measure_triad_bandwidth(peak_threads());
    return p;
  }();
  return peak;
}

double peak_gflops(const MachinePeak& p) { return peak_gflops(p.fma_all_threads); }
double peak_gflops(const PeakMeasurement& fma_all_threads) { return fma_all_threads.summary.max; }

nlohmann::json to_json(const PeakMeasurement& m) {
  const MedianCI& ci = m.summary.median_ci;
  nlohmann::json j = {{"unit", m.unit},
                      {"median", m.summary.median},
                      {"ci_95", ci.available ? nlohmann::json::array({ci.lower, ci.upper}) : nlohmann::json()},
                      {"best", m.summary.max},
                      {"runs", m.outcome.runs},
                      {"validity", to_string(m.outcome.validity)},
                      {"reason", m.outcome.reason},
                      {"threads", m.threads},
                      {"isa", m.isa}};
  j.update(m.info);
  return j;
}

nlohmann::json fma_peak_json(const PeakMeasurement& fma_all_threads) {
  return {{"dtype", "f32"}, {"isa", fma_all_threads.isa}, {"fma_gflops", to_json(fma_all_threads)}};
}

nlohmann::json to_json(const MachinePeak& p) {
  return {{"dtype", "f32"},
          {"isa", to_string(p.isa)},
          {"fma_gflops", to_json(p.fma_all_threads)},
          {"fma_gflops_one_thread", to_json(p.fma_one_thread)},
          {"triad_gbps", to_json(p.triad)}};
}

CaseResult to_case(const PeakMeasurement& m) {
  CaseResult c;
  c.name = m.name;
  c.level = "harness";
  c.params = {{"isa", m.isa}, {"threads", m.threads}};
  c.params.update(m.info);
  c.outcome = m.outcome;
  MetricRecord r;
  r.name = m.unit == "GB/s" ? "bandwidth" : "fma_rate";
  r.unit = m.unit;
  r.samples = m.samples;
  r.summary = m.summary;
  c.metrics.push_back(std::move(r));
  return c;
}

}  // namespace d5
