#pragma once
// The page under construction: sections of escaped HTML, tables and Vega-Lite plots. Internal to
// d5_report; the sections (sections.h) write into it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/results.h"

namespace d5::report {

class Page {
 public:
  // Starts a section (closing the previous one); `intro` is plain text.
  void section(const std::string& id, const std::string& title, const std::string& intro = "");
  void paragraph(const std::string& text);  // plain text
  void heading(const std::string& text);    // a sub-heading, plain text
  // Plain-text cells; a cell that is a case state (PASSED, ...) is coloured. `collapsed`: inside
  // a <details> element whose summary is `summary`.
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             const std::string& summary = "", bool collapsed = false);
  // A Vega-Lite plot with a plain-text caption.
  void plot(nlohmann::json spec, const std::string& caption);

  int plots() const { return static_cast<int>(specs_.size()); }
  const nlohmann::json& specs() const { return specs_; }
  const std::vector<std::pair<std::string, std::string>>& toc() const { return toc_; }
  std::string body() const;  // every section, closed

 private:
  std::string body_;
  bool open_ = false;
  nlohmann::json specs_ = nlohmann::json::array();
  std::vector<std::pair<std::string, std::string>> toc_;  // id, title
};

// "2.876 ms", "34.5 GFLOP/s", "0.2949" (unit "fraction" or ""), "1.50 MiB".
std::string format_quantity(double v, const std::string& unit);
// "2.876 ms [2.822 ms, 2.929 ms]"; "[no CI: reason]" when the summary has none.
std::string format_with_ci(const Summary& s, const std::string& unit);
// The metric's median with its CI, or why there is none ("unavailable: ...", "no samples").
std::string metric_cell(const MetricRecord& m);
// Seconds shown in one unit for a whole plot: the factor and the unit's name ("ms").
struct TimeUnit {
  double factor;
  std::string name;
};
TimeUnit time_unit_for(double typical_seconds);
// A file name for tables: the path relative to the current directory when shorter.
std::string display_path(const std::string& path);

}  // namespace d5::report
