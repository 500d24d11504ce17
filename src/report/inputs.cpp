// Finding and reading the result files a report is made of.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "deep500/core/error.h"
#include "deep500/report/report.h"

namespace d5 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_divergence_report(const json& j) {
  return j.is_object() && j.contains("optimizer") && j.contains("twin") && j.contains("steps") &&
         j["steps"].is_array();
}

json parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in.good(), IoError, "cannot open '{}'", path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    throw FormatError(fmt::format("'{}' is not valid JSON: {}", path, e.what()));
  }
}

}  // namespace

ReportInput report_input_from_json(const std::string& path, const json& j) {
  ReportInput in;
  in.path = path;
  if (j.is_object() && j.contains("schema")) {
    try {
      in.results = results_from_json(j);
    } catch (const FormatError& e) {
      throw FormatError(fmt::format("'{}': {}", path, e.what()));
    }
    // d5 divergence's results: the report is its case's extra.
    for (const auto& c : in.results.cases)
      if (is_divergence_report(c.extra)) {
        in.kind = ReportInputKind::Divergence;
        in.divergence = c.extra;
        break;
      }
    return in;
  }
  if (is_divergence_report(j)) {
    in.kind = ReportInputKind::Divergence;
    in.divergence = j;
    if (j.contains("manifest") && j["manifest"].is_object()) in.results.manifest = j["manifest"];
    return in;
  }
  throw FormatError(fmt::format("'{}' is not a deep500 result: neither a results file (\"schema\": \"{}\") nor a "
                                "d5 divergence report; write one with a d5 command's --format json -o FILE",
                                path, kResultsSchemaName));
}

ReportInputs read_report_inputs(const std::vector<std::string>& paths) {
  D5_CHECK_ARG(!paths.empty(), "no result files given: name result files (--format json -o FILE) or directories");
  ReportInputs out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto status = fs::status(p, ec);
    D5_CHECK(fs::exists(status), IoError, "'{}' does not exist", p);
    if (!fs::is_directory(status)) {
      out.inputs.push_back(report_input_from_json(p, parse_file(p)));
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied))
      if (e.is_regular_file() && e.path().extension() == ".json") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    for (const auto& f : found) {
      try {
        out.inputs.push_back(report_input_from_json(f, parse_file(f)));
      } catch (const Error& e) {
        // Directories may hold other JSON (configurations, ONNX test data): list, do not fail.
        out.skipped.push_back({f, e.what()});
      }
    }
  }
  D5_CHECK_ARG(!out.inputs.empty(), "no deep500 result among {} (every .json file found was skipped: {})",
               fmt::format("{}", fmt::join(paths, ", ")),
               out.skipped.empty() ? std::string("none found") : out.skipped.front().reason);
  return out;
}

}  // namespace d5
