// Level 2 data loading (`d5 data bench`, docs/data-bench.md): the DatasetLatency distributions per
// dataset and source, one panel per number of reading processes (the paper's Fig. 8), and the
// median time per batch per container, order and page-cache state (its Table III).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string param(const CaseResult& c, const char* key) {
  const auto it = c.params.find(key);
  return it != c.params.end() && it->is_string() ? it->get<std::string>() : std::string("?");
}

std::string processes(int64_t ranks) { return fmt::format("{} reading process{}", ranks, ranks == 1 ? "" : "es"); }

// The row of a case in the table: what was read, and by how many processes.
std::string row_of(const CaseRef& r, const ReportInputs& in) {
  return fmt::format("{} · {} · {}{}", param(*r.c, "dataset"), param(*r.c, "source"), processes(ranks_of(*r.c)),
                     file_suffix(r, in));
}

std::string column_of(const CaseResult& c) { return param(c, "order") + " · " + param(c, "cache") + " cache"; }

json distributions_spec(const std::vector<CaseRef>& cases, const ReportInputs& in, const TimeUnit& u) {
  json values = json::array();
  double smallest = INFINITY, largest = 0;
  for (const auto& r : cases) {
    const MetricRecord& m = r.c->metrics[0];
    const std::string group = fmt::format("{} · {}{}", param(*r.c, "dataset"), param(*r.c, "source"), file_suffix(r, in));
    const std::string panel = processes(ranks_of(*r.c));
    const std::string access = column_of(*r.c);
    for (double v : m.samples) {
      values.push_back({{"dataset", group}, {"source", param(*r.c, "source")}, {"processes", panel}, {"access", access},
                        {"t", v * u.factor}, {"case", r.c->name},
                        {"file", fs::path(r.input->path).filename().string()}});
      smallest = std::min(smallest, v);
      largest = std::max(largest, v);
    }
  }
  // Synthetic and real often differ by orders of magnitude: a linear axis would flatten one of them.
  const json scale = smallest > 0 && largest / smallest > 20 ? json{{"type", "log"}} : json{{"zero", false}};
  const std::string title = fmt::format("DatasetLatency per batch ({})", u.name);
  json spec = {{"data", {{"values", std::move(values)}}},
               {"facet", {{"column", {{"field", "processes"}, {"type", "nominal"}, {"title", nullptr}}}}},
               {"spec",
                {{"width", 260},
                 {"height", 260},
                 {"mark", {{"type", "boxplot"}, {"extent", 1.5}}},
                 {"encoding",
                  {{"x", {{"field", "dataset"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}}},
                   {"y", {{"field", "t"}, {"type", "quantitative"}, {"title", title}, {"scale", scale}}},
                   {"color", {{"field", "source"}, {"type", "nominal"}}},
                   {"xOffset", {{"field", "access"}, {"type", "nominal"}}},
                   {"tooltip", json::array({{{"field", "case"}}})}}}}}};
  return spec;
}

}  // namespace

bool is_data_bench(const CaseResult& c) {
  return !c.metrics.empty() && c.metrics[0].name == "DatasetLatency" && c.params.contains("source") &&
         c.params.contains("order") && c.params.contains("cache");
}

void add_dataset_latency(const ReportInputs& in, Page& page) {
  std::vector<CaseRef> cases;
  for (const auto& r : all_cases(in))
    if (is_data_bench(*r.c) && r.c->metrics[0].summary) cases.push_back(r);
  if (cases.empty()) return;
  page.section("dataset-latency", "Dataset latency",
               "d5 data bench: the time Dataset::fetch takes for one batch (read, decode and assemble, nothing "
               "overlapped), from the dataset's files (real) or from generated inputs of the same shape (synthetic), "
               "by one reading process or several at once.");
  std::vector<CaseRef> drawn;
  std::vector<double> medians;
  for (const auto& r : cases)
    if (r.c->state == CaseState::Passed) {
      drawn.push_back(r);
      medians.push_back(r.c->metrics[0].summary->median);
    }
  if (!drawn.empty()) {
    std::nth_element(medians.begin(), medians.begin() + medians.size() / 2, medians.end());
    page.plot(distributions_spec(drawn, in, time_unit_for(medians[medians.size() / 2])),
              "DatasetLatency per batch: box from the first to the third quartile, Tukey's whiskers, one box per "
              "dataset, source and access pattern (order, page cache); one panel per number of reading processes.");
  }
  // The table: a row per dataset, source and process count; a column per order and cache state.
  std::vector<std::string> rows, columns;
  std::map<std::pair<std::string, std::string>, std::string> cells;
  std::vector<std::vector<std::string>> details;
  for (const auto& r : cases) {
    const std::string row = row_of(r, in), column = column_of(*r.c);
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
    const MetricRecord& m = r.c->metrics[0];
    const MetricRecord* per_s = find_metric(*r.c, "samples_per_s");
    std::string cell = metric_cell(m);
    if (per_s && per_s->summary) cell += fmt::format(" · {:.0f} samples/s", per_s->summary->median);
    if (r.c->state != CaseState::Passed) cell += fmt::format(" ({})", to_string(r.c->state));
    cells[{row, column}] = cell;
    const json& e = r.c->extra;
    std::string cache = "-";
    if (e.contains("resident_before") && e["resident_before"].is_number() && e.contains("resident_after") &&
        e["resident_after"].is_number())
      cache = fmt::format("{:.1f}% before, {:.1f}% after", 100 * e["resident_before"].get<double>(),
                          100 * e["resident_after"].get<double>());
    details.push_back({r.c->name + file_suffix(r, in), metric_cell(m), per_s ? metric_cell(*per_s) : "-", cache,
                       r.c->outcome ? fmt::format("{}: {}", to_string(r.c->outcome->validity), r.c->outcome->reason)
                                    : "-",
                       to_string(r.c->state), r.c->detail});
  }
  std::vector<std::string> header{"dataset · source · processes"};
  for (const auto& c : columns) header.push_back(c + ": time per batch, median [95% CI]");
  std::vector<std::vector<std::string>> table;
  for (const auto& row : rows) {
    std::vector<std::string> line{row};
    for (const auto& c : columns) {
      const auto it = cells.find({row, c});
      line.push_back(it == cells.end() ? "-" : it->second);
    }
    table.push_back(std::move(line));
  }
  page.table(header, table);
  page.table({"case", "DatasetLatency", "samples/s", "page cache (cold: files resident)", "verdict", "state", "detail"},
             details, "Every case", true);
}

}  // namespace d5::report
