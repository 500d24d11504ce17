#include "page.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "deep500/report/report.h"
#include "deep500/metrics/reporter.h"

namespace d5::report {

void Page::section(const std::string& id, const std::string& title, const std::string& intro) {
  if (open_) body_ += "</section>\n";
  body_ += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n", html_escape(id), html_escape(title));
  if (!intro.empty()) paragraph(intro);
  toc_.emplace_back(id, title);
  open_ = true;
}

void Page::paragraph(const std::string& text) { body_ += "<p>" + html_escape(text) + "</p>\n"; }

void Page::heading(const std::string& text) { body_ += "<h3>" + html_escape(text) + "</h3>\n"; }

void Page::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                 const std::string& summary, bool collapsed) {
  static const std::vector<std::string> states = {"PASSED", "FAILED", "SKIPPED", "UNIMPLEMENTED", "MISTRUSTED",
                                                  "VALID", "INVALID"};
  std::string t;
  if (collapsed) t += "<details><summary>" + html_escape(summary) + "</summary>\n";
  else if (!summary.empty()) heading(summary);
  t += "<div class=\"table-wrap\"><table>\n<thead><tr>";
  for (const auto& h : header) t += "<th>" + html_escape(h) + "</th>";
  t += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    t += "<tr>";
    for (const auto& cell : row) {
      const bool state = std::find(states.begin(), states.end(), cell) != states.end();
      t += state ? fmt::format("<td class=\"state state-{}\">", cell) : std::string("<td>");
      t += html_escape(cell) + "</td>";
    }
    t += "</tr>\n";
  }
  t += "</tbody></table></div>\n";
  if (collapsed) t += "</details>\n";
  body_ += t;
}

void Page::plot(nlohmann::json spec, const std::string& caption) {
  body_ += fmt::format("<figure><div class=\"d5-plot\" data-plot=\"{}\"></div><figcaption>{}</figcaption></figure>\n",
                       specs_.size(), html_escape(caption));
  specs_.push_back(std::move(spec));
}

std::string Page::body() const { return open_ ? body_ + "</section>\n" : body_; }

std::string format_quantity(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "n/a";
  if (unit == "s") return format_seconds(v);
  if (unit == "bytes") return format_bytes(v);
  if (unit.empty() || unit == "fraction") return fmt::format("{:.4g}", v);
  return fmt::format("{:.4g} {}", v, unit);
}

std::string format_with_ci(const Summary& s, const std::string& unit) {
  std::string out = format_quantity(s.median, unit);
  if (s.median_ci.available)
    out += fmt::format(" [{}, {}]", format_quantity(s.median_ci.lower, unit), format_quantity(s.median_ci.upper, unit));
  else
    out += s.n == 1 ? " [one sample, no CI]" : fmt::format(" [no CI: {}]", s.median_ci.reason);
  return out;
}

std::string metric_cell(const MetricRecord& m) {
  if (!m.available) return "unavailable: " + m.unavailable_reason;
  if (!m.summary) return "no samples";
  return format_with_ci(*m.summary, m.unit);
}

TimeUnit time_unit_for(double s) {
  const double a = std::abs(s);
  if (a >= 1 || !std::isfinite(a)) return {1, "s"};
  if (a >= 1e-3) return {1e3, "ms"};
  if (a >= 1e-6) return {1e6, "us"};
  return {1e9, "ns"};
}

std::string display_path(const std::string& path) {
  std::error_code ec;
  const auto rel = std::filesystem::proximate(path, ec).string();
  return !ec && rel.size() < path.size() ? rel : path;
}

}  // namespace d5::report
