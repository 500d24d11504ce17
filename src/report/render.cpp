// Assembles the page: header, contents, the sections present in the inputs, the inlined Vega
// bundles, the plot specs and the script that draws them.
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/report/report.h"
#include "page.h"
#include "page_assets.h"
#include "sections.h"

namespace d5 {

Report render_report(const ReportInputs& inputs, const VegaBundles& bundles, const ReportOptions& options) {
  using namespace report;
  Page page;
  // Sections read each command's `extra` data by key and type. A file whose value has another type
  // than its producer writes (a string where a number belongs) is bad input, not a bug in d5.
  const auto section = [&](const char* title, void (*add)(const ReportInputs&, Page&)) {
    try {
      add(inputs, page);
    } catch (const nlohmann::json::exception& e) {
      D5_THROW(FormatError, "a result file's data for the report's {} section is malformed ({}); the report reads "
               "the form docs/report.md describes",
               title, e.what());
    }
  };
  section("inputs", add_overview);
  section("times", add_time_distributions);
  section("throughput", add_throughput);
  section("d5 against native calls", add_native_overhead);
  section("time per operator type", add_breakdown);
  section("convergence", add_convergence);
  section("optimizer divergence", add_divergence);
  section("reinforcement learning", add_reinforcement_learning);
  section("dataset latency", add_dataset_latency);
  section("forward differences", add_heatmaps);
  section("scaling", add_scaling);
  section("history", add_trends);
  section("ranked list", add_ranked_lists);
  section("all cases", add_case_tables);
  section("manifest", add_manifests);

  const std::string when = fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(std::chrono::system_clock::to_time_t(
                                                                       std::chrono::system_clock::now())));
  std::string nav;
  for (const auto& [id, title] : page.toc())
    nav += fmt::format("<a href=\"#{}\">{}</a>", html_escape(id), html_escape(title));

  std::string html;
  html.reserve(bundles.vega.size() + bundles.vega_lite.size() + bundles.vega_embed.size() + (1 << 20));
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + html_escape(options.title) + "</title>\n<style>" + kPageStyle + "</style>\n</head>\n<body>\n";
  html += fmt::format("<header><h1>{}</h1><p>{} input file(s){}, generated {} by deep500 {} ({}); plots by {}</p></header>\n",
                      html_escape(options.title), inputs.inputs.size(),
                      (inputs.trends_source.empty()
                           ? ""
                           : fmt::format(" and {} measurement(s) of {}", inputs.trends.size(),
                                         html_escape(display_path(inputs.trends_source)))) +
                          (inputs.lists_source.empty()
                               ? ""
                               : fmt::format(", {} ranked list(s) of {}", inputs.lists.size(),
                                             html_escape(display_path(inputs.lists_source)))),
                      when, html_escape(build_info().version),
                      html_escape(build_info().git_revision.substr(0, 12)), html_escape(bundles.versions));
  html += "<nav>" + nav + "</nav>\n";
  html += fmt::format("<div id=\"d5-status\" data-plots-expected=\"{}\" data-plots-drawn=\"0\" data-errors=\"0\" "
                      "data-warnings=\"0\" data-done=\"false\">Drawing {} plot(s)&hellip; (this needs JavaScript)</div>\n",
                      page.plots(), page.plots());
  html += "<ul id=\"d5-errors\" hidden></ul>\n<main>\n" + page.body() + "</main>\n";
  html += "<footer>Medians with nonparametric 95% confidence intervals (Hoefler &amp; Belli, SC15). Every plot is "
          "interactive: hover for values; plots with continuous axes pan and zoom.</footer>\n";
  // The bundles were checked for "</script" when loaded; the data is escaped by json_for_script.
  html += "<script>" + bundles.vega + "</script>\n";
  html += "<script>" + bundles.vega_lite + "</script>\n";
  html += "<script>" + bundles.vega_embed + "</script>\n";
  html += "<script type=\"application/json\" id=\"d5-specs\">" + json_for_script(page.specs()) + "</script>\n";
  html += std::string("<script>") + kPageScript + "</script>\n</body>\n</html>\n";

  Report r;
  r.html = std::move(html);
  r.plots = page.plots();
  for (const auto& [id, title] : page.toc()) r.sections.push_back(title);
  return r;
}

}  // namespace d5
