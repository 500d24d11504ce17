#pragma once
// Pieces the operator benchmarks in bench/ share: argument parsing, the two timing loops that
// are compared (d5's runner and a hand-written one, on the host's clock or a device's), ratio
// summaries and result cases.
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
#include "deep500/metrics/timing_loops.h"
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

// The timing loops live in the library (the CLI's `d5 ops overhead` runs them too).
using d5::device_clock;
using d5::fixed_runs;
using d5::hand_device_loop;
using d5::hand_loop;
using d5::harness_device_runs;
using d5::harness_runs;

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
