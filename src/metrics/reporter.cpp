#include "deep500/metrics/reporter.h"

#include <cmath>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "n/a";
  const double a = std::abs(s);
  if (a < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (a < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (a < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

namespace {
std::string format_value(double v, const std::string& unit) {
  if (unit == "s") return format_seconds(v);
  if (unit == "bytes") return format_bytes(v);
  return fmt::format("{:.4g} {}", v, unit);
}

std::string metric_cell(const MetricRecord& m) {
  if (!m.available) return "unavailable";
  if (!m.summary) return "no samples";
  const Summary& s = *m.summary;
  std::string cell = format_value(s.median, m.unit);
  if (s.median_ci.available)
    cell += fmt::format(" [{}, {}]", format_value(s.median_ci.lower, m.unit),
                        format_value(s.median_ci.upper, m.unit));
  else
    cell += " [no CI]";
  return cell;
}
}  // namespace

void ConsoleReporter::write(const Results& r, std::ostream& out) const {
  const auto& m = r.manifest;
  if (m.contains("version"))
    out << fmt::format("deep500 {} ({}{}) on {} | {} threads | {}\n", m.value("version", ""),
                       m.value("git_revision", "").substr(0, 12), m.value("git_dirty", false) ? "+dirty" : "",
                       m.contains("cpu") ? m["cpu"].value("model", "") : "",
                       m.contains("threads") ? m["threads"].value("omp_max_threads", 0) : 0,
                       m.value("start_time_utc", ""));
  out << fmt::format("{:<40} {:<10} {:<13} {:>5}  {:<44} {}\n", "case", "backend", "state", "runs",
                     "median [95% CI]", "validity");
  int counts[5] = {};
  for (const auto& c : r.cases) {
    ++counts[static_cast<int>(c.state)];
    const std::string primary = c.metrics.empty() ? "" : metric_cell(c.metrics.front());
    out << fmt::format("{:<40} {:<10} {:<13} {:>5}  {:<44} {}\n", c.name, c.backend,
                       to_string(c.state), c.outcome ? std::to_string(c.outcome->runs) : "-", primary,
                       c.outcome ? to_string(c.outcome->validity) : "");
    if (!c.detail.empty()) out << "    " << c.detail << "\n";
    if (c.outcome && c.outcome->validity == Validity::Invalid) out << "    " << c.outcome->reason << "\n";
    for (size_t i = 1; i < c.metrics.size(); ++i)
      out << fmt::format("    {:<24} {}\n", c.metrics[i].name,
                         c.metrics[i].available ? metric_cell(c.metrics[i])
                                                : "unavailable: " + c.metrics[i].unavailable_reason);
  }
  out << fmt::format("{} passed, {} failed, {} skipped, {} unimplemented, {} mistrusted\n", counts[0],
                     counts[1], counts[2], counts[3], counts[4]);
}

void JsonReporter::write(const Results& r, std::ostream& out) const { out << to_json(r).dump(2) << "\n"; }

std::unique_ptr<Reporter> make_reporter(std::string_view format) {
  if (format == "console") return std::make_unique<ConsoleReporter>();
  if (format == "json") return std::make_unique<JsonReporter>();
  D5_THROW(InvalidArgument, "unknown format '{}': use console or json", format);
}

}  // namespace d5
