#pragma once
// Results: a manifest plus cases, each with raw samples, summaries and a named state.
// The JSON form is versioned and documented in docs/results-format.md.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/metric.h"
#include "deep500/metrics/runner.h"

namespace d5 {

inline constexpr int kResultsSchemaVersion = 1;
inline constexpr const char* kResultsSchemaName = "deep500.results";

// How a case ended (benchdnn's states).
enum class CaseState { Passed, Failed, Skipped, Unimplemented, Mistrusted };
const char* to_string(CaseState s);
CaseState parse_case_state(std::string_view s);  // "PASSED" ... ; FormatError otherwise

struct CaseResult {
  std::string name;
  std::string level;    // "L0" .. "L3", or "" for harness-level cases
  std::string backend;
  nlohmann::json params = nlohmann::json::object();
  CaseState state = CaseState::Passed;
  std::string detail;   // why it failed / was skipped; the worst element; ...
  std::optional<RunOutcome> outcome;  // present for measured cases
  std::vector<MetricRecord> metrics;
  nlohmann::json extra = nlohmann::json::object();
};

struct Results {
  nlohmann::json manifest = nlohmann::json::object();
  std::vector<CaseResult> cases;
};

nlohmann::json to_json(const Summary& s);
Summary summary_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MetricRecord& m);
MetricRecord metric_from_json(const nlohmann::json& j);
nlohmann::json to_json(const CaseResult& c);
CaseResult case_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Results& r);
// Validates the schema name and version; throws FormatError naming the offending key.
Results results_from_json(const nlohmann::json& j);

void write_results(const std::string& path, const Results& r);  // atomic
Results read_results(const std::string& path);

}  // namespace d5
