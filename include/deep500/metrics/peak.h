#pragma once
// Measured peaks of this machine: the f32 fused multiply-add rate (GFLOP/s) and the memory
// bandwidth (GB/s, a STREAM-triad-like kernel). Operator benchmarks report their throughput as
// a fraction of these, which says more than a GFLOP/s figure alone: a datasheet peak assumes
// clocks and ports that a virtual machine or a busy host may not give, a measured one does not.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/core/device.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/statistics.h"

namespace d5 {

// Vector instruction sets the FMA kernel is compiled for (target attributes, chosen at run time).
enum class FmaIsa { Avx512f, Avx2Fma, Sse2, Scalar };
const char* to_string(FmaIsa isa);
int f32_lanes(FmaIsa isa);         // 16, 8, 4, 1
int independent_chains(FmaIsa isa);  // accumulators the kernel keeps in registers
// The kernels this CPU can run (its usable ISA per cpu_info(), not merely present), widest first;
// Scalar is always last.
std::vector<FmaIsa> usable_fma_isas(const CpuInfo& cpu = cpu_info());

struct PeakSettings {
  double run_seconds = 0.005;      // work per run: long against the clock and the scheduler, short against noise
  double max_seconds = 0.3;        // measured-phase budget per figure
  double warmup_seconds = 0.05;    // lets the clock governor ramp up
  int64_t triad_array_bytes = 0;   // per array; 0 = max(64 MiB, 4 x last-level cache x sockets)
};

struct PeakMeasurement {
  std::string name;   // "fma_all_threads", "fma_one_thread", "triad"
  std::string unit;   // "GFLOP/s" or "GB/s"
  std::string isa;    // kernel ISA ("avx512f", ...); the triad's is whatever the compiler chose
  int threads = 1;
  double work_per_run = 0;       // flops or bytes of one run
  std::vector<double> samples;   // one rate per run
  Summary summary;
  RunOutcome outcome;
  nlohmann::json info = nlohmann::json::object();
};

// Runs `workload` under the adaptive runner with the settings' run budget and fills m.samples,
// m.summary and m.outcome. Each sample is *rate as the workload left it (a device's kernels time
// themselves with events) or, without `rate`, m.work_per_run / wall seconds, in units of 1e9/s.
void measure_rate(PeakMeasurement& m, const std::function<void()>& workload, const PeakSettings& s,
                  const double* rate = nullptr);

// f32 FMA chains on `threads` OpenMP threads (each runs the same independent chains).
PeakMeasurement measure_fma_peak(FmaIsa isa, int threads, const PeakSettings& s = {});
// a[i] = b[i] + s * c[i] over three double arrays on `threads` threads; 24 bytes per element
// counted (two reads, one write), as STREAM does.
PeakMeasurement measure_triad_bandwidth(int threads, const PeakSettings& s = {});

struct MachinePeak {
  FmaIsa isa = FmaIsa::Scalar;
  PeakMeasurement fma_all_threads, fma_one_thread, triad;
};
// The three figures with kernel `isa`, the FMA rate and triad on `threads` threads.
MachinePeak measure_machine_peak(FmaIsa isa, int threads, const PeakSettings& s = {});
// The all-thread FMA figure with the widest usable ISA and all OpenMP threads: what throughput
// fractions divide by. Measured on first use (well under a second), then cached for the life of
// the process; machine_peak() includes this same measurement.
const PeakMeasurement& machine_fma_peak();
// All three figures, measured on first use and cached for the life of the process (seconds of
// work: the triad's arrays are larger than the last-level cache several times over).
const MachinePeak& machine_peak();

// The peak FMA rate a throughput is divided by: the best all-thread run, STREAM's convention for
// peaks. Interference (other processes, preemption) only ever slows a run down, so on a busy host
// the median underestimates what the units deliver and fractions of it could exceed 1.
double peak_gflops(const MachinePeak& p);
double peak_gflops(const PeakMeasurement& fma_all_threads);

nlohmann::json to_json(const PeakMeasurement& m);  // median, CI, best, runs, validity; no raw samples
nlohmann::json to_json(const MachinePeak& p);
// The FMA figure alone, in to_json(MachinePeak)'s shape without the other two fields.
nlohmann::json fma_peak_json(const PeakMeasurement& fma_all_threads);
// A result case for reports: the rate as its metric, raw samples included.
CaseResult to_case(const PeakMeasurement& m);

}  // namespace d5
