// Timing loops for harness-overhead comparisons (deep500/metrics/timing_loops.h).
#include "deep500/metrics/timing_loops.h"

#include <chrono>

#include "deep500/core/error.h"
#include "deep500/metrics/standard_metrics.h"

namespace d5 {

std::vector<double> hand_loop(const std::function<void()>& f, int runs) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

RunSettings fixed_runs(int runs) {
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = s.max_runs = runs;
  s.target_ci_ratio = 1e-12;
  s.max_seconds = 1e9;
  return s;
}

std::vector<double> harness_runs(const std::function<void()>& f, int runs) {
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  run_measured(f, metrics, fixed_runs(runs));
  return metrics[0].samples();
}

std::unique_ptr<DeviceRun> device_clock(Device d) {
  auto run = std::make_unique<DeviceRun>(d, true);
  D5_CHECK(run->timed(), InvalidArgument, "{} has no clock of its own to time calls with", d.to_string());
  return run;
}

std::vector<double> hand_device_loop(const std::function<void()>& f, int runs, DeviceRun& timed) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    timed(f);
    t.push_back(timed.seconds);
  }
  return t;
}

std::vector<double> harness_device_runs(const std::function<void()>& f, int runs, DeviceRun& timed) {
  MetricSet metrics;
  metrics.add(std::make_unique<DeviceTime>(&timed.seconds, timed.describe()));
  metrics.add(std::make_unique<WallTime>());
  run_measured([&] { timed(f); }, metrics, fixed_runs(runs));
  return metrics[0].samples();
}

}  // namespace d5
