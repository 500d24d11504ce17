// d5.stats: the statistics every d5 result uses (metrics/statistics.h), for samples measured in
// Python. Plain dicts: the same keys as the result files' JSON.
#include <pybind11/stl.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/statistics.h"

namespace d5::python {

namespace {

py::dict median_ci_dict(const std::vector<double>& samples, double confidence) {
  const MedianCI ci = median_ci(samples, confidence);
  py::dict d;
  d["available"] = ci.available;
  d["lower"] = ci.available ? py::cast(ci.lower) : py::none();
  d["upper"] = ci.available ? py::cast(ci.upper) : py::none();
  d["lower_rank"] = ci.lower_rank;
  d["upper_rank"] = ci.upper_rank;
  d["achieved_level"] = ci.achieved_level;
  d["reason"] = ci.reason;
  return d;
}

MannWhitneyMethod method_of(const std::string& m) {
  if (m == "auto") return MannWhitneyMethod::Auto;
  if (m == "exact") return MannWhitneyMethod::Exact;
  if (m == "asymptotic") return MannWhitneyMethod::Asymptotic;
  throw InvalidArgument("method must be 'auto', 'exact' or 'asymptotic', got '" + m + "'");
}

// d5's adaptive runner over a Python callable: warm-up, then runs until the median's CI is tight
// enough or a limit is reached; the GIL stays held (the workload is Python).
py::dict measure(const py::function& fn, int min_runs, int max_runs, double max_time, int warmup, double target_ci) {
  RunSettings rs;
  rs.min_runs = min_runs;
  rs.max_runs = max_runs;
  rs.max_seconds = max_time;
  rs.warmup_runs = warmup;
  rs.target_ci_ratio = target_ci;
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  const RunOutcome out = run_measured([&] { fn(); }, metrics, rs);
  py::dict d;
  d["validity"] = to_string(out.validity);
  d["reason"] = out.reason;
  d["runs"] = out.runs;
  d["warmup_runs"] = out.warmup_runs;
  d["seconds"] = out.seconds;
  d["ci_ratio"] = out.ci_ratio;
  d["wall_time"] = json_to_python(to_json(metrics.results().front()).dump());
  return d;
}

}  // namespace

void bind_stats(py::module_& m) {
  m.def("_median_ci", &median_ci_dict, py::arg("samples"), py::arg("confidence"));
  m.def(
      "_mann_whitney",
      [](const std::vector<double>& a, const std::vector<double>& b, const std::string& method) {
        const MannWhitneyResult r = mann_whitney_u(a, b, method_of(method));
        py::dict d;
        d["u_x"] = r.u_x;
        d["u_y"] = r.u_y;
        d["z"] = r.z;
        d["p_value"] = r.p_value;
        d["exact"] = r.exact;
        return d;
      },
      py::arg("a"), py::arg("b"), py::arg("method"));
  m.def("_measure", &measure, py::arg("fn"), py::arg("min_runs"), py::arg("max_runs"), py::arg("max_time"),
        py::arg("warmup"), py::arg("target_ci"));
  m.def(
      "_summarize", [](const std::vector<double>& s) { return json_to_python(to_json(summarize(s)).dump()); },
      py::arg("samples"));
}

}  // namespace d5::python
