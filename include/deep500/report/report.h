#pragma once
// The HTML report: result files of any d5 command turned into one self-contained page with
// interactive Vega-Lite plots (docs/report.md). The page inlines the Vega bundles and all data, so
// it opens with no network.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/results.h"

namespace d5 {

// What a report reads: a results file (schema deep500.results), or a `d5 divergence` report
// (its own JSON document: optimizer, twin, steps, manifest).
enum class ReportInputKind { Results, Divergence };

struct ReportInput {
  std::string path;
  ReportInputKind kind = ReportInputKind::Results;
  Results results;        // kind Results; for Divergence only the manifest
  nlohmann::json divergence;  // kind Divergence: the whole document
};

// A JSON file found in a directory that is not a d5 result (and why); the page lists them.
struct SkippedInput {
  std::string path, reason;
};

// One measurement of a result history (d5 db): a point of the page's trend plots.
struct TrendPoint {
  std::string series;     // "CASE @ BACKEND on MACHINE"
  std::string metric, unit;
  std::string start_utc;  // the run's start time, ISO 8601
  std::string commit;
  double median = 0;
  std::optional<double> ci_lower, ci_upper;
  int64_t n = 0;
};

// One row of a ranked list (d5 report --list, docs/report.md#ranked-lists).
struct ListRow {
  int rank = 0;                  // 1, 2, ...; 0: listed, not ranked (note says why)
  std::optional<double> score;
  std::string submitter, system, machine, cpu, backends, commit, start_utc, submitted_utc;
  std::string validity, note, id;
  bool outputs_verified = false;
};

// A ranked list: one recipe (as published) in one division.
struct ListTable {
  std::string recipe, recipe_hash, division;
  std::string quantity, unit;
  bool lower_is_better = true;
  std::vector<ListRow> rows;  // ranked rows first, by rank
};

struct ReportInputs {
  std::vector<ReportInput> inputs;
  std::vector<SkippedInput> skipped;
  std::vector<TrendPoint> trends;  // from a result history, oldest first per series
  std::string trends_source;       // the database they came from
  std::vector<ListTable> lists;    // ranked lists of a result history's submissions
  std::string lists_source;
};

// Files are read as given: a file that is no d5 result is a FormatError naming it. Directories
// are searched recursively for *.json files, in path order; those that are not d5 results are
// skipped with the reason. A missing path is an IoError; no input at all, InvalidArgument.
ReportInputs read_report_inputs(const std::vector<std::string>& paths);
// One document: recognises the kind; FormatError (naming `path`) otherwise.
ReportInput report_input_from_json(const std::string& path, const nlohmann::json& j);

// The three browser bundles the page inlines.
struct VegaBundles {
  std::string vega, vega_lite, vega_embed;  // the minified UMD builds
  std::string versions;                     // "vega 6.2.0, vega-lite 6.4.1, vega-embed 7.1.0"
};
// $D5_VEGA_DIR, else the source tree's third_party/vega/node_modules (scripts/install-vega.sh).
std::string default_vega_dir();
// Reads `node_modules/{vega,vega-lite,vega-embed}/build/*.min.js`. Unimplemented, naming the
// install step, when one is missing: a page that cannot draw is never written.
VegaBundles load_vega_bundles(const std::string& node_modules_dir);

struct ReportOptions {
  std::string title = "deep500 report";
};

struct Report {
  std::string html;
  int plots = 0;                      // Vega-Lite plots on the page
  std::vector<std::string> sections;  // titles, in page order
};

Report render_report(const ReportInputs& inputs, const VegaBundles& bundles, const ReportOptions& options = {});

// Escaping for what the page embeds. Text and attribute values: & < > " '. Inside a <script>
// element: JSON whose '<', '>', '&' and U+2028/U+2029 are \u escapes, so no string in it can
// close the element or open a comment; invalid UTF-8 is replaced, never an error.
std::string html_escape(std::string_view text);
std::string json_for_script(const nlohmann::json& j);

}  // namespace d5
