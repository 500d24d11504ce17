#pragma once
// The adaptive runner: warm-up, then repeat a workload until the primary metric's median is
// known tightly enough, or a limit is reached. It never knows what the workload is.
#include <functional>
#include <string>

#include "deep500/metrics/metric.h"

namespace d5 {

struct RunSettings {
  int warmup_runs = 2;
  double warmup_seconds = 0;       // keep warming up until this much time has passed too
  int min_runs = 10;
  int max_runs = 1000;
  double max_seconds = 10;         // measured-phase budget
  double target_ci_ratio = 0.02;   // CI half-width / median at which to stop
  double ci_level = 0.95;
};

enum class Validity { Valid, Invalid };
const char* to_string(Validity v);

struct RunOutcome {
  Validity validity = Validity::Invalid;
  std::string reason;     // always set: "CI ±1.2% after 34 runs" or "CI ±3.4% after 30.0 s (limit)"
  int warmup_runs = 0;
  int runs = 0;
  double seconds = 0;     // wall time of the measured phase
  double ci_ratio = 0;    // achieved CI half-width / median; +inf when unavailable
};

// CI half-width relative to the median: max(median - lower, upper - median) / |median|.
// +inf when the CI is unavailable or the median is 0.
double ci_half_width_ratio(const std::vector<double>& samples, double level);

// Runs `workload` under `metrics`. A metric asking for a fixed number of reruns raises
// min_runs to that number. Throws InvalidArgument for inconsistent settings.
RunOutcome run_measured(const std::function<void()>& workload, MetricSet& metrics,
                        const RunSettings& settings = {});

}  // namespace d5
