// Forward-difference heatmaps: where in an output a backend differs from the reference, from the
// checks of `d5 ops bench --mode check|grad` (extra.check) and `d5 net` (extra.validation).
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

constexpr size_t kMaxHeatmapPlots = 30;

struct Panel {
  std::string case_name, label;
  const json* output;
};

// One problem's outputs on every backend, side by side, each with its own colour scale.
json heatmap_spec(const std::vector<Panel>& panels) {
  json cells = json::array();
  for (const auto& p : panels) {
    const json& o = *p.output;
    const json& h = o["heatmap"];
    const std::string tol = fmt::format("atol {:.3g}, rtol {:.3g}; {} mismatch(es); max |diff| {:.3g}",
                                        o.value("atol", 0.0), o.value("rtol", 0.0), o.value("mismatches", 0),
                                        o.value("max_abs_error", 0.0));
    for (size_t r = 0; r < h["values"].size(); ++r)
      for (size_t c = 0; c < h["values"][r].size(); ++c) {
        const json& v = h["values"][r][c];
        // A non-finite mismatch is +inf, written as null.
        cells.push_back({{"panel", p.label}, {"row", r}, {"col", c},
                         {"diff", v.is_number() ? v : json(nullptr)},
                         {"nonfinite", !v.is_number()},
                         {"tolerance", tol}});
      }
  }
  const json tooltip = json::array({{{"field", "panel"}}, {{"field", "row"}, {"title", "block row"}},
                                    {{"field", "col"}, {"title", "block column"}},
                                    {{"field", "diff"}, {"title", "max |actual - reference|"}, {"format", ".3g"}},
                                    {{"field", "tolerance"}}});
  const json x = {{"field", "col"}, {"type", "ordinal"}, {"title", "block column"}, {"axis", {{"labels", false}, {"ticks", false}}}};
  const json y = {{"field", "row"}, {"type", "ordinal"}, {"title", "block row"}, {"axis", {{"labels", false}, {"ticks", false}}}};
  json layers = json::array(
      {{{"mark", "rect"},
        {"encoding", {{"x", x}, {"y", y},
                      {"color", {{"field", "diff"}, {"type", "quantitative"}, {"scale", {{"scheme", "viridis"}}},
                                 {"title", "max |diff|"}, {"legend", {{"format", ".2g"}}}}},
                      {"tooltip", tooltip}}}},
       {{"transform", json::array({{{"filter", "datum.nonfinite"}}})},
        {"mark", {{"type", "rect"}, {"color", "#c0392b"}}},
        {"encoding", {{"x", x}, {"y", y}, {"tooltip", tooltip}}}}});
  return {{"data", {{"values", std::move(cells)}}},
          {"facet", {{"column", {{"field", "panel"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}}}}},
          {"spec", {{"width", 150}, {"height", 150}, {"layer", std::move(layers)}}},
          {"resolve", {{"scale", {{"color", "independent"}}}}}};
}

bool has_heatmap(const json& o) {
  return o.is_object() && o.contains("heatmap") && o["heatmap"].is_object() && o["heatmap"].contains("values") &&
         o["heatmap"]["values"].is_array() && !o["heatmap"]["values"].empty();
}

}  // namespace

void add_heatmaps(const ReportInputs& in, Page& page) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<Panel>> by_case;
  for (const auto& r : all_cases(in)) {
    for (const char* key : {"check", "validation"}) {
      const json& e = r.c->extra;
      if (!e.contains(key) || !e[key].is_object() || !e[key].contains("outputs")) continue;
      for (const auto& o : e[key]["outputs"]) {
        if (!has_heatmap(o)) continue;
        const std::string problem = problem_of(*r.c);
        const std::string output = o.contains("name") && o["name"].is_string()
                                       ? o["name"].get<std::string>()
                                       : fmt::format("output {}", o.value("index", 0));
        if (!by_case.count(problem)) order.push_back(problem);
        by_case[problem].push_back({r.c->name, series_of(r, in) + " · " + output, &o});
      }
    }
  }
  if (order.empty()) return;
  page.section("differences", "Forward differences",
               "Where each backend's outputs differ from the reference backend's: the output viewed as [leading "
               "dimensions, last dimension] in blocks, each block's largest |actual - reference| (docs/validation.md). "
               "Red blocks hold a non-finite mismatch. Each panel has its own colour scale.");
  for (size_t i = 0; i < order.size() && i < kMaxHeatmapPlots; ++i)
    page.plot(heatmap_spec(by_case[order[i]]), order[i]);
  if (order.size() > kMaxHeatmapPlots)
    page.paragraph(fmt::format("Heatmaps of the first {} of {} checked cases are drawn.", kMaxHeatmapPlots, order.size()));
}

}  // namespace d5::report
