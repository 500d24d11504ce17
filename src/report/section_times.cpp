// Time distributions (violin and box per backend, one plot per problem, with the median's CI) and
// throughput against problem size under the measured machine peak.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

constexpr size_t kMaxProblemPlots = 40;  // per level; the tables list every case
constexpr int kDensityPoints = 48;

// Gaussian kernel density over [lo, hi] (the whiskers: samples beyond them are drawn as points),
// scaled to a half-width of at most 0.45 so that a violin fills most of its column. Silverman's
// rule for the bandwidth; samples that are all equal get a narrow bump, not a division by zero.
std::vector<std::pair<double, double>> violin(const std::vector<double>& x, const Summary& s, double lo, double hi) {
  const double n = static_cast<double>(x.size());
  double spread = s.stddev;
  if (s.iqr > 0) spread = std::min(spread, s.iqr / 1.34);
  double h = 0.9 * spread * std::pow(n, -0.2);
  if (!(h > 0)) h = std::max(std::abs(s.median) * 1e-3, 1e-12);
  if (hi - lo < h) {
    lo -= h;
    hi += h;
  }
  std::vector<std::pair<double, double>> out;
  double peak = 0;
  for (int i = 0; i < kDensityPoints; ++i) {
    const double t = lo + (hi - lo) * i / (kDensityPoints - 1);
    double d = 0;
    for (double v : x) d += std::exp(-0.5 * (t - v) * (t - v) / (h * h));
    out.emplace_back(t, d);
    peak = std::max(peak, d);
  }
  for (auto& p : out) p.second = peak > 0 ? 0.45 * p.second / peak : 0;
  return out;
}

// Tukey's whiskers: the furthest samples within 1.5 IQR of the quartiles.
std::pair<double, double> whiskers(const std::vector<double>& x, const Summary& s) {
  double lo = s.median, hi = s.median;
  for (double v : x) {
    if (v >= s.q1 - 1.5 * s.iqr) lo = std::min(lo, v);
    if (v <= s.q3 + 1.5 * s.iqr) hi = std::max(hi, v);
  }
  return {lo, hi};
}

json y_enc(const std::string& field, const std::string& title, const json& scale) {
  return {{"field", field}, {"type", "quantitative"}, {"title", title}, {"scale", scale}};
}

json stats_layer(json mark, json encoding) {
  encoding["x"] = {{"datum", 0}};
  return {{"transform", json::array({{{"filter", "datum.kind === 'stats'"}}})}, {"mark", std::move(mark)},
          {"encoding", std::move(encoding)}};
}

json violin_spec(const std::vector<CaseRef>& cases, const ReportInputs& in, const std::string& metric,
                 const TimeUnit& u) {
  json values = json::array();
  double smallest = INFINITY, largest = 0;
  size_t outliers = 0;
  for (const auto& r : cases) {
    const MetricRecord& m = *primary_time(*r.c);
    // Whiskers and outliers are decided on the samples as measured, against the fences the summary
    // counted its outliers with: scaling first can move a sample lying on a fence across it, and the
    // plot would then draw a different number of outliers than the stats row says.
    const auto [measured_lo, measured_hi] = whiskers(m.samples, *m.summary);
    const double wlo = measured_lo * u.factor, whi = measured_hi * u.factor;
    std::vector<double> x;
    for (double v : m.samples) x.push_back(v * u.factor);
    Summary s = *m.summary;
    for (double* f : {&s.min, &s.max, &s.median, &s.q1, &s.q3, &s.iqr, &s.stddev, &s.median_ci.lower,
                      &s.median_ci.upper})
      *f *= u.factor;
    const std::string series = series_of(r, in);
    // One column per backend; a Level 3 series gets one per rank count.
    const int64_t ranks = ranks_of(*r.c);
    const std::string column = ranks > 0 ? fmt::format("{} · {} ranks", series, ranks) : series;
    for (const auto& [t, w] : violin(x, s, wlo, whi))
      values.push_back({{"kind", "density"}, {"series", series}, {"column", column}, {"t", t}, {"left", -w}, {"right", w}});
    for (double v : m.samples)
      if (v < measured_lo || v > measured_hi) {
        values.push_back(
            {{"kind", "outlier"}, {"series", series}, {"column", column}, {"t", v * u.factor}, {"case", r.c->name}});
        ++outliers;
      }
    smallest = std::min(smallest, s.min);
    largest = std::max(largest, s.max);
    values.push_back({{"kind", "stats"},
                      {"series", series},
                      {"column", column},
                      {"median", s.median},
                      {"q1", s.q1},
                      {"q3", s.q3},
                      {"whisker_lo", wlo},
                      {"whisker_hi", whi},
                      {"ci_lo", s.median_ci.available ? s.median_ci.lower : s.median},
                      {"ci_hi", s.median_ci.available ? s.median_ci.upper : s.median},
                      {"case", r.c->name},
                      {"median [95% CI]", format_with_ci(*m.summary, m.unit)},
                      {"runs", s.n},
                      {"Tukey outliers", s.outliers}});
  }
  const std::string title = fmt::format("{} ({})", metric, u.name);
  // Outliers far from the rest would flatten every violin on a linear axis.
  const json scale = smallest > 0 && largest / smallest > 20 ? json{{"type", "log"}} : json{{"zero", false}};
  const json tooltip = json::array({{{"field", "case"}}, {{"field", "series"}, {"title", "backend"}},
                                    {{"field", "median [95% CI]"}}, {{"field", "runs"}}, {{"field", "Tukey outliers"}}});
  json color = series_color(in);
  color["legend"] = nullptr;
  json layers = json::array();
  layers.push_back({{"transform", json::array({{{"filter", "datum.kind === 'density'"}}})},
                    {"mark", {{"type", "area"}, {"orient", "horizontal"}, {"opacity", 0.45}}},
                    {"encoding",
                     {{"y", y_enc("t", title, scale)},
                      {"x", {{"field", "left"}, {"type", "quantitative"}, {"scale", {{"domain", {-0.5, 0.5}}}}, {"axis", nullptr}}},
                      {"x2", {{"field", "right"}}},
                      {"color", color}}}});
  // A layer with no data would leave its scale an empty domain (a Vega warning).
  if (outliers > 0)
    layers.push_back({{"transform", json::array({{{"filter", "datum.kind === 'outlier'"}}})},
                      {"mark", {{"type", "point"}, {"size", 14}, {"opacity", 0.7}}},
                      {"encoding", {{"y", y_enc("t", title, scale)}, {"x", {{"datum", 0}}}, {"color", color},
                                    {"tooltip", json::array({{{"field", "case"}}, {{"field", "t"}, {"title", title}, {"format", ".4g"}}})}}}});
  layers.push_back(stats_layer({{"type", "rule"}, {"color", "#444"}},
                               {{"y", y_enc("whisker_lo", title, scale)}, {"y2", {{"field", "whisker_hi"}}}}));
  layers.push_back(stats_layer({{"type", "rule"}, {"color", "#999"}, {"strokeWidth", 10}},
                               {{"y", y_enc("q1", title, scale)}, {"y2", {{"field", "q3"}}}, {"tooltip", tooltip}}));
  layers.push_back(stats_layer({{"type", "rule"}, {"color", "black"}, {"strokeWidth", 4}},
                               {{"y", y_enc("ci_lo", title, scale)}, {"y2", {{"field", "ci_hi"}}}, {"tooltip", tooltip}}));
  layers.push_back(stats_layer({{"type", "tick"}, {"color", "white"}, {"thickness", 2}, {"size", 14}},
                               {{"y", y_enc("median", title, scale)}, {"tooltip", tooltip}}));
  return {{"data", {{"values", std::move(values)}}},
          {"facet", {{"column", {{"field", "column"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr},
                                  {"header", {{"labelOrient", "bottom"}}}}}}},
          {"spec", {{"width", 110}, {"height", 220}, {"layer", std::move(layers)}}}};
}

// Every problem's median and CI per backend on one log axis.
json overview_spec(const std::vector<CaseRef>& cases, const ReportInputs& in, const std::string& metric,
                   const TimeUnit& u, size_t problems, size_t series) {
  json values = json::array();
  for (const auto& r : cases) {
    const MetricRecord& m = *primary_time(*r.c);
    const Summary& s = *m.summary;
    values.push_back({{"case", problem_of(*r.c)},
                      {"name", r.c->name},
                      {"series", series_of(r, in)},
                      {"median", s.median * u.factor},
                      {"ci_lo", (s.median_ci.available ? s.median_ci.lower : s.median) * u.factor},
                      {"ci_hi", (s.median_ci.available ? s.median_ci.upper : s.median) * u.factor},
                      {"median [95% CI]", format_with_ci(s, m.unit)}});
  }
  const json y = {{"field", "case"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}};
  const json x = {{"field", "median"}, {"type", "quantitative"}, {"scale", {{"type", "log"}}},
                  {"title", fmt::format("{} median and 95% CI ({})", metric, u.name)}};
  const json color = series_color(in);
  const json offset = {{"field", "series"}, {"type", "nominal"}};
  json spec = base_spec(std::move(values), 560, static_cast<int>(problems * (series * 9 + 10)));
  spec["layer"] = json::array(
      {{{"mark", "rule"},
        {"encoding", {{"y", y}, {"yOffset", offset}, {"x", {{"field", "ci_lo"}, {"type", "quantitative"},
                                                           {"scale", {{"type", "log"}}}, {"title", x["title"]}}},
                      {"x2", {{"field", "ci_hi"}}}, {"color", color}}}},
       {{"mark", {{"type", "point"}, {"filled", true}}},
        {"encoding", {{"y", y}, {"yOffset", offset}, {"x", x}, {"color", color},
                      {"tooltip", json::array({{{"field", "name"}, {"title", "case"}}, {{"field", "series"}, {"title", "backend"}},
                                               {{"field", "median [95% CI]"}}})}}}}});
  return spec;
}

const char* level_title(const std::string& level) {
  if (level == "L0") return "Operator times";
  if (level == "L1") return "Network times";
  if (level == "L2") return "Training step times";
  if (level == "L3") return "Distributed step times";
  return "Times";
}

}  // namespace

void add_time_distributions(const ReportInputs& in, Page& page) {
  std::map<std::string, std::vector<CaseRef>> by_level;
  for (const auto& r : all_cases(in))
    if (primary_time(*r.c) && r.c->state == CaseState::Passed && !is_data_bench(*r.c)) by_level[r.c->level].push_back(r);
  for (const auto& [level, cases] : by_level) {
    const std::string metric = primary_time(*cases.front().c)->name;
    page.section("times-" + (level.empty() ? std::string("other") : level), level_title(level),
                 fmt::format("Distribution of each case's primary time over its measured runs (warm-up excluded): a "
                             "violin (kernel density), the box from the first to the third quartile with Tukey's "
                             "whiskers (grey), the median's 95% CI (black) and the median (white)."));
    std::vector<std::string> order;
    std::map<std::string, std::vector<CaseRef>> by_problem;
    std::map<std::string, bool> series;
    std::vector<double> medians;
    for (const auto& r : cases) {
      const std::string problem = problem_of(*r.c);
      if (!by_problem.count(problem)) order.push_back(problem);
      by_problem[problem].push_back(r);
      series[series_of(r, in)] = true;
      medians.push_back(primary_time(*r.c)->summary->median);
    }
    std::nth_element(medians.begin(), medians.begin() + medians.size() / 2, medians.end());
    const TimeUnit overview_unit = time_unit_for(medians[medians.size() / 2]);
    // Level 3 runs have their medians against ranks in the scaling section.
    if (order.size() > 1 && level != "L3")
      page.plot(overview_spec(cases, in, metric, overview_unit, order.size(), series.size()),
                fmt::format("{}: median per case and backend with its 95% CI (log scale).", metric));
    for (size_t i = 0; i < order.size() && i < kMaxProblemPlots; ++i) {
      const auto& group = by_problem[order[i]];
      double typical = 0;
      for (const auto& r : group) typical = std::max(typical, primary_time(*r.c)->summary->median);
      page.plot(violin_spec(group, in, metric, time_unit_for(typical)), order[i]);
    }
    if (order.size() > kMaxProblemPlots)
      page.paragraph(fmt::format("Distributions of the first {} of {} cases are drawn; the tables below list all.",
                                 kMaxProblemPlots, order.size()));
  }
}

void add_throughput(const ReportInputs& in, Page& page) {
  json points = json::array(), peaks = json::array();
  for (const auto& r : all_cases(in)) {
    const MetricRecord* g = find_metric(*r.c, "gflops");
    const json& e = r.c->extra;
    if (!g || !g->summary || !e.contains("flops") || !e["flops"].is_number() || e["flops"].get<double>() <= 0) continue;
    const Summary& s = *g->summary;
    points.push_back({{"case", r.c->name},
                      {"series", series_of(r, in)},
                      {"op", e.value("op", std::string("?"))},
                      {"gflop", e["flops"].get<double>() / 1e9},
                      {"median", s.median},
                      {"ci_lo", s.median_ci.available ? s.median_ci.lower : s.median},
                      {"ci_hi", s.median_ci.available ? s.median_ci.upper : s.median},
                      {"GFLOP/s [95% CI]", format_with_ci(s, g->unit)}});
  }
  if (points.empty()) return;
  // One line per distinct peak: inputs measured on one run of d5 share it.
  std::map<double, std::pair<const json*, std::vector<std::string>>> distinct;
  for (const auto& i : in.inputs) {
    const json& m = i.results.manifest;
    if (!m.contains("extra") || !m["extra"].contains("peak") || !m["extra"]["peak"].contains("fma_gflops")) continue;
    const json& p = m["extra"]["peak"]["fma_gflops"];
    if (!p.contains("best") || !p["best"].is_number()) continue;
    auto& d = distinct[p["best"].get<double>()];
    d.first = &p;
    d.second.push_back(display_path(i.path));
  }
  for (const auto& [best, d] : distinct) {
    const json& p = *d.first;
    std::string ci = "no CI";
    if (p.contains("ci_95") && p["ci_95"].is_array() && p["ci_95"].size() == 2 && p["ci_95"][0].is_number())
      ci = fmt::format("[{:.4g}, {:.4g}]", p["ci_95"][0].get<double>(), p["ci_95"][1].get<double>());
    const std::string label = fmt::format("measured peak {:.4g} GFLOP/s (best run; median {:.4g} {}){}", best,
                                          p.value("median", 0.0), ci,
                                          distinct.size() > 1 ? fmt::format(" · {}", fmt::join(d.second, ", ")) : "");
    peaks.push_back({{"peak", best}, {"label", label}});
  }
  page.section("throughput", "Throughput against problem size",
               "GFLOP/s per call (median and 95% CI) against the work of one call, with the machine's measured "
               "f32 FMA peak as the upper bound (docs/peak.md). Drag to pan, scroll to zoom.");
  const json log = {{"type", "log"}};
  const json color = series_color(in);
  const json y_title = "GFLOP/s (median, 95% CI)";
  json spec = base_spec(points, 640, 360);
  spec.erase("data");
  json layers = json::array();
  layers.push_back({{"data", {{"values", points}}},
                    {"mark", "rule"},
                    {"encoding", {{"x", {{"field", "gflop"}, {"type", "quantitative"}, {"scale", log}, {"title", "GFLOP per call"}}},
                                  {"y", {{"field", "ci_lo"}, {"type", "quantitative"}, {"scale", log}, {"title", y_title}}},
                                  {"y2", {{"field", "ci_hi"}}}, {"color", color}}}});
  layers.push_back({{"data", {{"values", points}}},
                    {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
                    {"params", json::array({{{"name", "zoom"}, {"select", "interval"}, {"bind", "scales"}}})},
                    {"encoding", {{"x", {{"field", "gflop"}, {"type", "quantitative"}, {"scale", log}}},
                                  {"y", {{"field", "median"}, {"type", "quantitative"}, {"scale", log}, {"title", y_title}}},
                                  {"color", color},
                                  {"shape", {{"field", "op"}, {"type", "nominal"}, {"title", "operator"}}},
                                  {"tooltip", json::array({{{"field", "case"}}, {{"field", "series"}, {"title", "backend"}},
                                                           {{"field", "op"}}, {{"field", "gflop"}, {"title", "GFLOP per call"}},
                                                           {{"field", "GFLOP/s [95% CI]"}}})}}}});
  // Several peaks' labels would overprint each other: then the lines' tooltips name them.
  if (peaks.size() == 1) {
    layers.push_back({{"data", {{"values", peaks}}},
                      {"mark", {{"type", "text"}, {"align", "left"}, {"dx", 4}, {"dy", -7}, {"color", "#c0392b"}}},
                      {"encoding", {{"y", {{"field", "peak"}, {"type", "quantitative"}, {"scale", log}}},
                                    {"x", {{"value", 0}}}, {"text", {{"field", "label"}}}}}});
  }
  if (!peaks.empty()) {
    layers.push_back({{"data", {{"values", peaks}}},
                      {"mark", {{"type", "rule"}, {"color", "#c0392b"}, {"strokeDash", {6, 4}}, {"strokeWidth", 2}}},
                      {"encoding", {{"y", {{"field", "peak"}, {"type", "quantitative"}, {"scale", log}}},
                                    {"tooltip", json::array({{{"field", "label"}, {"title", "peak"}}})}}}});
  }
  spec["layer"] = std::move(layers);
  std::string caption = peaks.empty() ? "No measured peak in these results (d5 ops bench records it)."
                                      : "Dashed: the measured peak (the best all-thread FMA run, which fractions of "
                                        "peak divide by).";
  if (peaks.size() > 1)
    for (const auto& p : peaks) caption += fmt::format(" {}.", p["label"].get<std::string>());
  page.plot(std::move(spec), caption);
}

}  // namespace d5::report
