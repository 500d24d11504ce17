// Tables: the inputs, every case and metric with its CI, and each input's manifest; and the
// helpers the plotting sections share.
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

std::vector<CaseRef> all_cases(const ReportInputs& in) {
  std::vector<CaseRef> out;
  for (const auto& i : in.inputs)
    for (const auto& c : i.results.cases) out.push_back({&i, &c});
  return out;
}

const MetricRecord* find_metric(const CaseResult& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

const MetricRecord* primary_time(const CaseResult& c) {
  if (c.metrics.empty()) return nullptr;
  const MetricRecord& m = c.metrics.front();
  return m.available && m.unit == "s" && !m.samples.empty() && m.summary ? &m : nullptr;
}

namespace {
// The file's name without extension, or its whole path where another input has the same name.
std::string file_label(const ReportInput& input, const ReportInputs& in) {
  const std::string stem = std::filesystem::path(input.path).stem().string();
  for (const auto& other : in.inputs)
    if (&other != &input && std::filesystem::path(other.path).stem().string() == stem) return display_path(input.path);
  return stem;
}
}  // namespace

std::string series_of(const CaseRef& r, const ReportInputs& in) {
  const std::string backend = r.c->backend.empty() ? "(no backend)" : r.c->backend;
  for (const auto& other : in.inputs) {
    if (&other == r.input) continue;
    for (const auto& c : other.results.cases)
      if (c.name == r.c->name && c.backend == r.c->backend) return backend + " · " + file_label(*r.input, in);
  }
  return backend;
}

std::string file_suffix(const CaseRef& r, const ReportInputs& in) {
  const std::string s = series_of(r, in);
  const size_t dot = s.find(" · ");
  return dot == std::string::npos ? std::string() : s.substr(dot);
}

json series_color(const ReportInputs& in) {
  // Only series with measurements: a backend that was skipped everywhere has nothing to colour.
  std::set<std::string> all;
  for (const auto& r : all_cases(in)) {
    bool measured = false;
    for (const auto& m : r.c->metrics) measured = measured || m.summary.has_value();
    if (measured) all.insert(series_of(r, in));
  }
  return {{"field", "series"}, {"type", "nominal"}, {"title", "backend"},
          {"scale", {{"domain", std::vector<std::string>(all.begin(), all.end())}}}};
}

int64_t ranks_of(const CaseResult& c) {
  for (const json* j : {&c.params, &c.extra})
    if (j->contains("ranks") && (*j)["ranks"].is_number_integer() && (*j)["ranks"].get<int64_t>() > 0)
      return (*j)["ranks"].get<int64_t>();
  return 0;
}

std::string without_ranks(const std::string& name) {
  static const std::regex ranks_element("(^|/)ranks=[0-9]+(?=/|$)");
  std::string s = std::regex_replace(name, ranks_element, "");
  if (!s.empty() && s.front() == '/') s.erase(0, 1);
  return s;
}

std::string problem_of(const CaseResult& c) {
  if (ranks_of(c) > 0) return without_ranks(c.name);
  if (!c.params.contains("network") || !c.params["network"].is_string()) return c.name;
  std::string p = c.params["network"].get<std::string>();
  if (c.params.contains("mode") && c.params["mode"].is_string()) p += " " + c.params["mode"].get<std::string>();
  if (c.params.contains("batch")) p += ", batch " + c.params["batch"].dump();
  return p;
}

json base_spec(json values, int width, int height) {
  return {{"width", width}, {"height", height}, {"data", {{"values", std::move(values)}}}};
}

namespace {

std::string manifest_line(const json& m) {
  std::string s = fmt::format("deep500 {}", m.value("version", "?"));
  if (m.contains("git_revision") && m["git_revision"].is_string())
    s += fmt::format(" ({}{})", m["git_revision"].get<std::string>().substr(0, 12),
                     m.value("git_dirty", false) ? "+dirty" : "");
  if (m.contains("cpu") && m["cpu"].is_object()) s += " on " + m["cpu"].value("model", std::string("?"));
  return s;
}

std::string command_of(const json& m) {
  if (!m.contains("command_line") || !m["command_line"].is_array()) return "";
  std::string s;
  for (const auto& a : m["command_line"]) {
    if (!s.empty()) s += ' ';
    s += a.is_string() ? a.get<std::string>() : a.dump();
  }
  return s;
}

// Nested objects become dotted keys; arrays of scalars one comma-separated cell.
void flatten(const json& j, const std::string& prefix, std::vector<std::vector<std::string>>& rows) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, rows);
    return;
  }
  if (j.is_array()) {
    bool scalars = true;
    for (const auto& v : j) scalars = scalars && !v.is_structured();
    if (!scalars) {
      for (size_t i = 0; i < j.size(); ++i) flatten(j[i], fmt::format("{}[{}]", prefix, i), rows);
      return;
    }
    std::string s;
    for (const auto& v : j) {
      if (!s.empty()) s += ", ";
      s += v.is_string() ? v.get<std::string>() : v.dump();
    }
    rows.push_back({prefix, s});
    return;
  }
  rows.push_back({prefix, j.is_string() ? j.get<std::string>() : j.dump()});
}

}  // namespace

void add_overview(const ReportInputs& in, Page& page) {
  if (in.inputs.empty()) return;  // a page of a result history only
  page.section("inputs", "Inputs",
               "Every result file this report was made from. Times are medians with their nonparametric 95% "
               "confidence intervals [lower, upper] (docs/statistics.md).");
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : in.inputs) {
    std::map<std::string, int> states;
    for (const auto& c : i.results.cases) ++states[to_string(c.state)];
    std::string counts;
    for (const auto& [s, n] : states) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, s);
    const json& m = i.results.manifest;
    rows.push_back({display_path(i.path),
                    i.kind == ReportInputKind::Divergence ? "divergence report" : "results",
                    i.kind == ReportInputKind::Divergence ? fmt::format("{} steps", i.divergence["steps"].size())
                                                           : fmt::format("{} case(s): {}", i.results.cases.size(), counts),
                    command_of(m), m.value("start_time_utc", std::string()), manifest_line(m)});
  }
  page.table({"file", "kind", "contents", "command", "started (UTC)", "build and host"}, rows);
  if (!in.skipped.empty()) {
    std::vector<std::vector<std::string>> skipped;
    for (const auto& s : in.skipped) skipped.push_back({display_path(s.path), s.reason});
    page.table({"file", "why it was skipped"}, skipped, fmt::format("{} JSON file(s) skipped", in.skipped.size()), true);
  }
}

void add_case_tables(const ReportInputs& in, Page& page) {
  const auto cases = all_cases(in);
  if (cases.empty()) return;
  page.section("cases", "All cases",
               "Each case's state, its primary metric (median [95% CI]) and how the measurement ended; then every "
               "metric of every case.");
  std::vector<std::vector<std::string>> rows, metrics;
  for (const auto& r : cases) {
    const CaseResult& c = *r.c;
    const MetricRecord* primary = c.metrics.empty() ? nullptr : &c.metrics.front();
    rows.push_back({c.name, c.backend, c.level, to_string(c.state),
                    primary ? primary->name + ": " + metric_cell(*primary) : "",
                    c.outcome ? std::string(c.outcome->validity == Validity::Valid ? "VALID" : "INVALID") : "",
                    c.outcome ? c.outcome->reason : "", c.detail});
    for (const auto& m : c.metrics)
      metrics.push_back({c.name, c.backend, m.name, metric_cell(m),
                         m.summary ? std::to_string(m.summary->n) : "0",
                         m.summary ? std::to_string(m.summary->outliers) : ""});
  }
  page.table({"case", "backend", "level", "state", "primary metric: median [95% CI]", "validity", "measurement",
              "detail"},
             rows);
  page.table({"case", "backend", "metric", "median [95% CI]", "n", "Tukey outliers"}, metrics,
             fmt::format("All {} metric(s)", metrics.size()), true);
}

void add_manifests(const ReportInputs& in, Page& page) {
  if (in.inputs.empty()) return;
  page.section("manifest", "Manifest",
               "Build, host, libraries, threads, seeds and environment of every input (docs/results-format.md).");
  for (const auto& i : in.inputs) {
    std::vector<std::vector<std::string>> rows;
    flatten(i.results.manifest, "", rows);
    page.table({"key", "value"}, rows, display_path(i.path) + ": " + manifest_line(i.results.manifest),
               in.inputs.size() > 1);
  }
}

}  // namespace d5::report
