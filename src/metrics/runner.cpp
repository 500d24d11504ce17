#include "deep500/metrics/runner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/metrics/timer.h"

namespace d5 {

const char* to_string(Validity v) { return v == Validity::Valid ? "VALID" : "INVALID"; }

double ci_half_width_ratio(const std::vector<double>& samples, double level) {
  if (samples.empty()) return std::numeric_limits<double>::infinity();
  const MedianCI ci = median_ci(samples, level);
  if (!ci.available) return std::numeric_limits<double>::infinity();
  const double med = percentile(samples, 50);
  if (med == 0) return std::numeric_limits<double>::infinity();
  return std::max(med - ci.lower, ci.upper - med) / std::abs(med);
}

RunOutcome run_measured(const std::function<void()>& workload, MetricSet& metrics,
                        const RunSettings& s) {
  D5_CHECK_ARG(metrics.size() > 0, "run_measured needs at least one metric");
  D5_CHECK_ARG(s.warmup_runs >= 0 && s.min_runs >= 1 && s.max_runs >= s.min_runs,
               "run settings: need warmup_runs >= 0 and 1 <= min_runs <= max_runs (got {}, {}, {})",
               s.warmup_runs, s.min_runs, s.max_runs);
  D5_CHECK_ARG(s.max_seconds > 0 && s.target_ci_ratio > 0 && s.ci_level > 0 && s.ci_level < 1,
               "run settings: max_seconds and target_ci_ratio must be positive and ci_level in (0, 1)");

  RunOutcome out;
  const int64_t warm_start = wall_now_ns();
  while (out.warmup_runs < s.warmup_runs ||
         static_cast<double>(wall_now_ns() - warm_start) * 1e-9 < s.warmup_seconds) {
    workload();
    ++out.warmup_runs;
  }

  metrics.reset();
  const int min_runs = std::max(s.min_runs, metrics.reruns());
  const int max_runs = std::max(s.max_runs, min_runs);
  const int64_t start = wall_now_ns();
  auto elapsed = [&] { return static_cast<double>(wall_now_ns() - start) * 1e-9; };

  bool converged = false;
  while (true) {
    metrics.begin();
    workload();
    metrics.end();
    ++out.runs;
    if (out.runs < min_runs) continue;
    out.ci_ratio = ci_half_width_ratio(metrics[0].samples(), s.ci_level);
    if (out.ci_ratio <= s.target_ci_ratio) {
      converged = true;
      break;
    }
    if (out.runs >= max_runs || elapsed() >= s.max_seconds) break;
  }
  out.seconds = elapsed();
  const std::string level = fmt::format("{:g}%", s.ci_level * 100);
  if (converged) {
    out.validity = Validity::Valid;
    out.reason = fmt::format("{} CI ±{:.2f}% of the median after {} runs ({:.2f} s)", level,
                             out.ci_ratio * 100, out.runs, out.seconds);
  } else if (!std::isfinite(out.ci_ratio)) {
    out.reason = fmt::format("no {} CI of the median after {} runs ({:.2f} s): {}", level, out.runs,
                             out.seconds,
                             median_ci(metrics[0].samples(), s.ci_level).available
                                 ? "the median is zero"
                                 : median_ci(metrics[0].samples(), s.ci_level).reason);
  } else {
    out.reason = fmt::format("{} CI ±{:.2f}% of the median after {} runs ({:.2f} s) exceeds the "
                             "±{:.2f}% target ({} reached)",
                             level, out.ci_ratio * 100, out.runs, out.seconds,
                             s.target_ci_ratio * 100,
                             out.runs >= max_runs ? "run limit" : "time limit");
  }
  return out;
}

}  // namespace d5
