#pragma once
// Pieces the operator benchmarks in bench/ share: argument parsing, the two timing loops that
// are compared (d5's runner and a hand-written one, on the host's clock or a device's), ratio
// summaries and result cases.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "deep500/metrics/device_run.h"
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/statistics.h"

namespace d5::bench {

// --key value pairs; a key given without a value is an error.
class Args {
 public:
  Args(int argc, char** argv, const std::map<std::string, std::string>& defaults) : values_(defaults) {
    for (int i = 1; i < argc; ++i) {
      const std::string key = argv[i];
      D5_CHECK_ARG(key.rfind("--", 0) == 0 && values_.count(key.substr(2)), "unknown option '{}'; options: {}", key,
                   names());
      D5_CHECK_ARG(i + 1 < argc, "option '{}' needs a value", key);
      values_[key.substr(2)] = argv[++i];
    }
  }
  std::string str(const std::string& k) const { return values_.at(k); }
  int integer(const std::string& k) const { return std::atoi(values_.at(k).c_str()); }
  double number(const std::string& k) const { return std::atof(values_.at(k).c_str()); }
  std::vector<std::string> list(const std::string& k) const {
    std::vector<std::string> out;
    std::string cur;
    for (char c : values_.at(k) + ",") {
      if (c != ',') {
        cur += c;
      } else if (!cur.empty()) {
        out.push_back(cur);
        cur.clear();
      }
    }
    return out;
  }

 private:
  std::string names() const {
    std::string s;
    for (const auto& [k, v] : values_) s += fmt::format("{}--{} ({})", s.empty() ? "" : ", ", k, v);
    return s;
  }
  std::map<std::string, std::string> values_;
};

inline double median(const std::vector<double>& v) { return percentile(v, 50); }

// "1.0031 [0.9987, 1.0102]", or the median with why there is no CI.
inline std::string with_ci(const std::vector<double>& r, const char* fmt_spec = "{:.4f}") {
  const auto ci = median_ci(r);
  const std::string m = fmt::format(fmt::runtime(fmt_spec), median(r));
  if (!ci.available) return m + " [no CI: " + ci.reason + "]";
  return fmt::format("{} [{}, {}]", m, fmt::format(fmt::runtime(fmt_spec), ci.lower),
                     fmt::format(fmt::runtime(fmt_spec), ci.upper));
}

// The hand-written loop: what a careful person times without a harness.
inline std::vector<double> hand_loop(const std::function<void()>& f, int runs) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

// Exactly `runs` runs and no warm-up, so that d5's runner does the hand loop's work.
inline RunSettings fixed_runs(int runs) {
  RunSettings s;
  s.warmup_runs = 0;
  s.min_runs = s.max_runs = runs;
  s.target_ci_ratio = 1e-12;
  s.max_seconds = 1e9;
  return s;
}

// d5's runner with exactly `runs` runs and no warm-up, so both loops do the same work.
inline std::vector<double> harness_runs(const std::function<void()>& f, int runs) {
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  run_measured(f, metrics, fixed_runs(runs));
  return metrics[0].samples();
}

// A DeviceRun that times with the device's own clock (caches flushed before each call), as the
// operator benchmark times a device operator; InvalidArgument for a device without one.
inline std::unique_ptr<DeviceRun> device_clock(Device d) {
  auto run = std::make_unique<DeviceRun>(d, true);
  D5_CHECK(run->timed(), InvalidArgument, "{} has no clock of its own to time calls with", d.to_string());
  return run;
}

// The hand loop on a device: `f` only queues its work; each run is the device's time for it.
inline std::vector<double> hand_device_loop(const std::function<void()>& f, int runs, DeviceRun& timed) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    timed(f);
    t.push_back(timed.seconds);
  }
  return t;
}

// d5's runner around the same device-timed call, with the DeviceTime metric first, as the
// operator benchmark measures a device operator; its samples are the device's times.
inline std::vector<double> harness_device_runs(const std::function<void()>& f, int runs, DeviceRun& timed) {
  MetricSet metrics;
  metrics.add(std::make_unique<DeviceTime>(&timed.seconds, timed.describe()));
  metrics.add(std::make_unique<WallTime>());
  run_measured([&] { timed(f); }, metrics, fixed_runs(runs));
  return metrics[0].samples();
}

// A result case holding a ratio's per-round samples. (Built by initialization: assigning
// strings here trips GCC 12's -Wrestrict false positive at -O3.)
inline CaseResult ratio_case(std::string name, std::string backend, nlohmann::json params,
                             const std::vector<double>& ratios, nlohmann::json extra = nlohmann::json::object()) {
  MetricRecord m{.name = "ratio",
                 .unit = "x",
                 .samples = ratios,
                 .summary = ratios.empty() ? std::nullopt : std::optional<Summary>(summarize(ratios)),
                 .available = true,
                 .unavailable_reason = "",
                 .info = nlohmann::json::object()};
  return CaseResult{.name = std::move(name),
                    .level = "L0",
                    .backend = std::move(backend),
                    .params = std::move(params),
                    .state = CaseState::Passed,
                    .detail = "",
                    .outcome = std::nullopt,
                    .metrics = {std::move(m)},
                    .extra = std::move(extra)};
}

}  // namespace d5::bench
