// Level 3: time against ranks, parallel efficiency and communication volume. The input shape is
// documented in docs/report.md ("Scaling"): L3 cases with params.ranks, their primary time metric
// and, optionally, extra.bytes_per_rank.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

struct Point {
  int64_t ranks;
  const CaseRef* ref;
  const MetricRecord* time;
};

// The series a case belongs to: its name without the "ranks=N" element.
std::string series_name(const CaseRef& r, const ReportInputs& in) {
  std::string s = without_ranks(r.c->name);
  if (s.empty()) s = r.c->backend;
  return s + file_suffix(r, in);
}

json log2_x() {
  return {{"field", "ranks"}, {"type", "quantitative"}, {"scale", {{"type", "log"}, {"base", 2}}},
          {"axis", {{"tickMinStep", 1}}}, {"title", "ranks"}};
}

json error_layers(json y_title, json tooltip, bool log_y) {
  const json color = {{"field", "series"}, {"type", "nominal"}};
  json scale = log_y ? json{{"type", "log"}} : json{{"zero", false}};
  return json::array(
      {{{"mark", "rule"},
        {"encoding", {{"x", log2_x()}, {"y", {{"field", "lo"}, {"type", "quantitative"}, {"scale", scale}, {"title", y_title}}},
                      {"y2", {{"field", "hi"}}}, {"color", color}}}},
       {{"mark", {{"type", "line"}, {"point", true}}},
        {"encoding", {{"x", log2_x()}, {"y", {{"field", "value"}, {"type", "quantitative"}, {"scale", scale}, {"title", y_title}}},
                      {"color", color}, {"tooltip", std::move(tooltip)}}}}});
}

}  // namespace

void add_scaling(const ReportInputs& in, Page& page) {
  const auto cases = all_cases(in);
  std::map<std::string, std::vector<Point>> series;
  for (const auto& r : cases) {
    if (r.c->level != "L3" || r.c->state != CaseState::Passed) continue;
    const int64_t p = ranks_of(*r.c);
    const MetricRecord* t = primary_time(*r.c);
    if (p > 0 && t) series[series_name(r, in)].push_back({p, &r, t});
  }
  if (series.empty()) return;
  json times = json::array(), efficiency = json::array(), volume = json::array();
  std::vector<double> medians;
  for (auto& [name, points] : series) {
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.ranks < b.ranks; });
    const Point& base = points.front();
    const Summary& b = *base.time->summary;
    const bool weak = base.ref->c->params.value("scaling", std::string("strong")) == "weak";
    const auto ci = [](const Summary& s) {
      return s.median_ci.available ? std::pair{s.median_ci.lower, s.median_ci.upper} : std::pair{s.median, s.median};
    };
    for (const auto& pt : points) {
      const Summary& s = *pt.time->summary;
      medians.push_back(s.median);
      times.push_back({{"series", name}, {"ranks", pt.ranks}, {"value", s.median}, {"lo", ci(s).first},
                       {"hi", ci(s).second}, {"time [95% CI]", format_with_ci(s, "s")}});
      // Strong scaling: T(p0) p0 / (T(p) p); weak: T(p0) / T(p). The interval combines the two
      // CIs' outer bounds, so it is conservative rather than a CI of the ratio.
      const double k = weak ? 1.0 : static_cast<double>(base.ranks) / static_cast<double>(pt.ranks);
      const double e = k * b.median / s.median, lo = k * ci(b).first / ci(s).second, hi = k * ci(b).second / ci(s).first;
      efficiency.push_back({{"series", name}, {"ranks", pt.ranks}, {"value", e}, {"lo", lo}, {"hi", hi},
                            {"scaling", weak ? "weak" : "strong"},
                            {"efficiency [interval]", fmt::format("{:.3f} [{:.3f}, {:.3f}] vs {} rank(s)", e, lo, hi, base.ranks)}});
      const json& e2 = pt.ref->c->extra;
      if (!e2.contains("bytes_per_rank")) continue;
      std::vector<double> bytes;
      if (e2["bytes_per_rank"].is_number()) bytes.push_back(e2["bytes_per_rank"].get<double>());
      if (e2["bytes_per_rank"].is_array())
        for (const auto& v : e2["bytes_per_rank"]) if (v.is_number()) bytes.push_back(v.get<double>());
      if (bytes.empty()) continue;
      const auto [mn, mx] = std::minmax_element(bytes.begin(), bytes.end());
      double mean = 0;
      for (double v : bytes) mean += v;
      mean /= static_cast<double>(bytes.size());
      volume.push_back({{"series", name}, {"ranks", pt.ranks}, {"value", mean / 1e6}, {"lo", *mn / 1e6}, {"hi", *mx / 1e6},
                        {"bytes per rank", bytes.size() > 1 ? fmt::format("mean {} (min {}, max {}) over {} ranks",
                                                                          format_quantity(mean, "bytes"), format_quantity(*mn, "bytes"),
                                                                          format_quantity(*mx, "bytes"), bytes.size())
                                                            : format_quantity(mean, "bytes")}});
    }
  }
  page.section("scaling", "Scaling",
               "Level 3 runs against the number of ranks: the time per step (median and 95% CI), the parallel "
               "efficiency relative to the fewest ranks of each series, and the bytes each rank communicates per step.");
  std::sort(medians.begin(), medians.end());
  const TimeUnit u = time_unit_for(medians[medians.size() / 2]);
  for (auto& t : times)
    for (const char* f : {"value", "lo", "hi"}) t[f] = t[f].get<double>() * u.factor;
  json spec = base_spec(std::move(times), 560, 300);
  spec["layer"] = error_layers(fmt::format("time per step ({}), median and 95% CI", u.name),
                               json::array({{{"field", "series"}}, {{"field", "ranks"}}, {{"field", "time [95% CI]"}}}), true);
  page.plot(std::move(spec), "Time per step against ranks (log-log).");
  spec = base_spec(std::move(efficiency), 560, 300);
  spec["layer"] = error_layers("parallel efficiency",
                               json::array({{{"field", "series"}}, {{"field", "ranks"}}, {{"field", "scaling"}},
                                            {{"field", "efficiency [interval]"}}}), false);
  page.plot(std::move(spec),
            "Efficiency: strong scaling T(p0)·p0 / (T(p)·p), weak scaling (params.scaling = \"weak\") T(p0) / T(p), "
            "with p0 the fewest ranks of the series; the bars combine the outer bounds of both times' 95% CIs.");
  if (!volume.empty()) {
    spec = base_spec(std::move(volume), 560, 300);
    spec["layer"] = error_layers("MB per rank per step",
                                 json::array({{{"field", "series"}}, {{"field", "ranks"}}, {{"field", "bytes per rank"}}}), false);
    page.plot(std::move(spec),
              "Communication volume: bytes each rank sends per step (counted, so exact; the bars span the ranks' "
              "minimum to maximum).");
  }
}

}  // namespace d5::report
