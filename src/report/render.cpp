// Assembles the page: header, contents, the sections present in the inputs, the inlined Vega
// bundles, the plot specs and the script that draws them.
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "deep500/core/build_info.h"
#include "deep500/report/report.h"
#include "page.h"
#include "page_assets.h"
#include "sections.h"

namespace d5 {

Report render_report(const ReportInputs& inputs, const VegaBundles& bundles, const ReportOptions& options) {
  using namespace report;
  Page page;
  add_overview(inputs, page);
  add_time_distributions(inputs, page);
  add_throughput(inputs, page);
  add_native_overhead(inputs, page);
  add_breakdown(inputs, page);
  add_convergence(inputs, page);
  add_divergence(inputs, page);
  add_reinforcement_learning(inputs, page);
  add_dataset_latency(inputs, page);
  add_heatmaps(inputs, page);
  add_scaling(inputs, page);
  add_trends(inputs, page);
  add_ranked_lists(inputs, page);
  add_case_tables(inputs, page);
  add_manifests(inputs, page);

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
