// Ranked lists of submissions (d5 report --list, docs/report.md#ranked-lists): per recipe and
// division, the ranked submissions' scores as bars (best on top) and every submission in a table,
// the unranked ones after the ranked with the reason.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

std::string score_text(const std::optional<double>& v, const std::string& unit) {
  return v ? format_quantity(*v, unit) : "-";
}

std::string anchor(const ListTable& t) {
  std::string id = "list-" + t.recipe + "-" + t.division + "-" + t.recipe_hash.substr(0, 8);
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
  return id;
}

void add_list(const ListTable& t, Page& page) {
  page.section(anchor(t), fmt::format("{} ({} division)", t.recipe, t.division),
               fmt::format("Recipe {} as published with SHA-256 {}; ranked by {} ({} is better). Only VALID "
                           "submissions with a score are ranked; every one was checked by `d5 db submit` against the "
                           "published recipe and its result files.",
                           t.recipe, t.recipe_hash.substr(0, 16), t.quantity,
                           t.lower_is_better ? "lower" : "higher"));
  json values = json::array();
  std::vector<std::vector<std::string>> rows;
  for (const ListRow& r : t.rows) {
    const std::string who = fmt::format("#{} {} · {}", r.rank, r.submitter, r.system);
    if (r.rank > 0 && r.score)
      values.push_back({{"submission", who}, {"score", *r.score}, {"rank", r.rank}, {"machine", r.machine},
                        {"backends", r.backends}, {"value", score_text(r.score, t.unit)}});
    rows.push_back({r.rank > 0 ? std::to_string(r.rank) : "-", score_text(r.score, t.unit), r.submitter, r.system,
                    r.machine, r.cpu, r.backends, r.commit.substr(0, 12), r.start_utc.substr(0, 19), r.validity,
                    r.outputs_verified ? "rerun: outputs reproduced" : "not rerun", r.note, r.id.substr(0, 12)});
  }
  if (!values.empty()) {
    const std::string title = t.unit.empty() ? t.quantity : fmt::format("{} [{}]", t.quantity, t.unit);
    const int height = std::max(60, 26 * static_cast<int>(values.size()));
    json spec = base_spec(std::move(values), 640, height);
    spec["mark"] = "bar";
    spec["encoding"] = {
        {"y", {{"field", "submission"}, {"type", "nominal"}, {"sort", {{"field", "rank"}}}, {"title", nullptr},
               {"axis", {{"labelLimit", 360}}}}},
        {"x", {{"field", "score"}, {"type", "quantitative"}, {"title", title}}},
        {"tooltip", json::array({{{"field", "submission"}}, {{"field", "value"}}, {{"field", "machine"}},
                                 {{"field", "backends"}}})}};
    page.plot(std::move(spec), fmt::format("{} of each ranked submission, best on top", t.quantity));
  }
  page.table({"rank", t.quantity, "submitter", "system", "machine", "CPU", "backends", "commit", "ran (UTC)",
              "validity", "outputs", "note", "submission"},
             rows);
}

}  // namespace

void add_ranked_lists(const ReportInputs& in, Page& page) {
  if (in.lists.empty()) return;
  for (const auto& t : in.lists) add_list(t, page);
}

}  // namespace d5::report
