#pragma once
// Result files the report tests need and no d5 command writes (yet): Level 3 scaling runs in the
// shape docs/report.md documents, and names that try to break out of the page.
#include <cmath>
#include <string>
#include <vector>

#include "deep500/metrics/results.h"
#include "deep500/metrics/statistics.h"

namespace d5::test {

// Eleven samples spread ±5% around `median` (so the median is exact and the CI is known).
inline MetricRecord time_metric(double median, const std::string& name = "wall_time") {
  MetricRecord m;
  m.name = name;
  m.unit = "s";
  for (int k = -5; k <= 5; ++k) m.samples.push_back(median * (1 + 0.01 * k));
  m.summary = summarize(m.samples);
  return m;
}

inline CaseResult timed_case(const std::string& name, const std::string& level, const std::string& backend,
                             double median) {
  CaseResult c;
  c.name = name;
  c.level = level;
  c.backend = backend;
  c.metrics.push_back(time_metric(median));
  return c;
}

// Strong scaling: T(p) = 1 s / p^0.8, each rank sending 4 MB (p - 1) / p per step; weak scaling:
// T(p) = 1 s + 0.05 s log2(p).
inline Results scaling_results() {
  Results r;
  r.manifest = {{"version", "test"}, {"command_line", {"synthetic"}}};
  for (int p : {1, 2, 4, 8}) {
    CaseResult s = timed_case("mlp/allreduce/ranks=" + std::to_string(p), "L3", "mpi", 1.0 / std::pow(p, 0.8));
    s.params = {{"ranks", p}};
    s.extra["bytes_per_rank"] = std::vector<double>(p, 4e6 * (p - 1) / p);
    r.cases.push_back(std::move(s));
    CaseResult w = timed_case("mlp/weak/ranks=" + std::to_string(p), "L3", "mpi", 1.0 + 0.05 * std::log2(p));
    w.params = {{"ranks", p}, {"scaling", "weak"}};
    r.cases.push_back(std::move(w));
  }
  return r;
}

inline const std::string kHostileName = "</script><script>document.title='pwned'</script><!-- & \" ' \xe2\x80\xa8";

// A case, a backend and a detail that are HTML and script: the page must show them as text.
inline Results hostile_results() {
  Results r;
  r.manifest = {{"version", "</script>"}, {"command_line", {"d5", kHostileName}}};
  CaseResult c = timed_case(kHostileName, "L0", "<b>backend</b>", 2e-3);
  c.detail = "<!-- <script>";
  r.cases.push_back(c);
  c.backend = "reference";
  c.metrics = {time_metric(3e-3)};
  r.cases.push_back(std::move(c));
  return r;
}

}  // namespace d5::test
