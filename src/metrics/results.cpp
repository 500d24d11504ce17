#include "deep500/metrics/results.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "deep500/metrics/atomic_file.h"
#include "deep500/core/error.h"

namespace d5 {

using nlohmann::json;

const char* to_string(CaseState s) {
  switch (s) {
    case CaseState::Passed: return "PASSED";
    case CaseState::Failed: return "FAILED";
    case CaseState::Skipped: return "SKIPPED";
    case CaseState::Unimplemented: return "UNIMPLEMENTED";
    case CaseState::Mistrusted: return "MISTRUSTED";
  }
  return "UNKNOWN";
}

CaseState parse_case_state(std::string_view s) {
  for (auto st : {CaseState::Passed, CaseState::Failed, CaseState::Skipped,
                  CaseState::Unimplemented, CaseState::Mistrusted})
    if (s == to_string(st)) return st;
  throw FormatError(fmt::format("unknown case state '{}' in results", s));
}

namespace {
// JSON has no inf/NaN; nlohmann writes them as null. Read null back as NaN so that a number
// that was not finite never turns into 0.
double num(const json& j, const char* key) {
  D5_CHECK(j.contains(key), FormatError, "results: missing key '{}'", key);
  const json& v = j.at(key);
  if (v.is_null()) return std::nan("");
  D5_CHECK(v.is_number(), FormatError, "results: key '{}' is not a number", key);
  return v.get<double>();
}

// Integers are read only when the JSON number is an integer that fits: nlohmann's get<int>()
// would convert 1e300 (undefined behaviour) or wrap 4294967297 to 1 instead of refusing.
template <typename T>
T integer(const json& v, const char* key) {
  D5_CHECK(v.is_number_integer(), FormatError, "results: key '{}' is not an integer: {}", key, v.dump());
  const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<uint64_t>()) : std::in_range<T>(v.get<int64_t>());
  D5_CHECK(fits, FormatError, "results: key '{}' is {}, outside the range of its type", key, v.dump());
  return v.get<T>();
}

template <typename T>
T get(const json& j, const char* key) {
  D5_CHECK(j.contains(key), FormatError, "results: missing key '{}'", key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return integer<T>(j.at(key), key);
  } else {
    try {
      return j.at(key).get<T>();
    } catch (const json::exception& e) {
      throw FormatError(fmt::format("results: key '{}' has the wrong type: {}", key, e.what()));
    }
  }
}

// A list the reader iterates; nlohmann would iterate an object's values or a scalar itself.
const json& array(const json& j, const char* key) {
  D5_CHECK(j.contains(key), FormatError, "results: missing key '{}'", key);
  D5_CHECK(j.at(key).is_array(), FormatError, "results: key '{}' is not a list", key);
  return j.at(key);
}
}  // namespace

json to_json(const Summary& s) {
  json ci = {{"available", s.median_ci.available}, {"level", 0.95}};
  if (s.median_ci.available) {
    ci["lower"] = s.median_ci.lower;
    ci["upper"] = s.median_ci.upper;
    ci["lower_rank"] = s.median_ci.lower_rank;
    ci["upper_rank"] = s.median_ci.upper_rank;
    ci["achieved_level"] = s.median_ci.achieved_level;
  } else {
    ci["reason"] = s.median_ci.reason;
  }
  return {{"n", s.n},       {"min", s.min},   {"max", s.max},         {"mean", s.mean},
          {"stddev", s.stddev}, {"cv", s.cv}, {"median", s.median},   {"p50", s.p50},
          {"p90", s.p90},   {"p95", s.p95},   {"p99", s.p99},         {"p99_9", s.p999},
          {"q1", s.q1},     {"q3", s.q3},     {"iqr", s.iqr},         {"tukey_outliers", s.outliers},
          {"median_ci", ci}, {"percentile_method", "interpolated (type 7)"}};
}

Summary summary_from_json(const json& j) {
  Summary s;
  s.n = get<int64_t>(j, "n");
  s.min = num(j, "min");
  s.max = num(j, "max");
  s.mean = num(j, "mean");
  s.stddev = num(j, "stddev");
  s.cv = num(j, "cv");
  s.median = num(j, "median");
  s.p50 = num(j, "p50");
  s.p90 = num(j, "p90");
  s.p95 = num(j, "p95");
  s.p99 = num(j, "p99");
  s.p999 = num(j, "p99_9");
  s.q1 = num(j, "q1");
  s.q3 = num(j, "q3");
  s.iqr = num(j, "iqr");
  s.outliers = get<int64_t>(j, "tukey_outliers");
  const json& ci = get<json>(j, "median_ci");
  s.median_ci.available = get<bool>(ci, "available");
  if (s.median_ci.available) {
    s.median_ci.lower = num(ci, "lower");
    s.median_ci.upper = num(ci, "upper");
    s.median_ci.lower_rank = get<int64_t>(ci, "lower_rank");
    s.median_ci.upper_rank = get<int64_t>(ci, "upper_rank");
    s.median_ci.achieved_level = num(ci, "achieved_level");
  } else {
    s.median_ci.reason = get<std::string>(ci, "reason");
  }
  return s;
}

json to_json(const MetricRecord& m) {
  json j = {{"name", m.name}, {"unit", m.unit}, {"available", m.available}, {"samples", m.samples}};
  if (!m.available) j["unavailable_reason"] = m.unavailable_reason;
  if (m.summary) j["summary"] = to_json(*m.summary);
  if (!m.info.empty()) j["info"] = m.info;
  return j;
}

MetricRecord metric_from_json(const json& j) {
  MetricRecord m;
  m.name = get<std::string>(j, "name");
  m.unit = get<std::string>(j, "unit");
  m.available = get<bool>(j, "available");
  for (const auto& v : array(j, "samples")) {
    D5_CHECK(v.is_null() || v.is_number(), FormatError, "results: metric '{}' has a sample that is not a number: {}",
             m.name, v.dump());
    m.samples.push_back(v.is_null() ? std::nan("") : v.get<double>());
  }
  if (!m.available) m.unavailable_reason = get<std::string>(j, "unavailable_reason");
  if (j.contains("summary")) m.summary = summary_from_json(j.at("summary"));
  if (j.contains("info")) m.info = j.at("info");
  return m;
}

json to_json(const CaseResult& c) {
  json j = {{"name", c.name},   {"level", c.level},           {"backend", c.backend},
            {"params", c.params}, {"state", to_string(c.state)}, {"detail", c.detail}};
  if (c.outcome) {
    j["outcome"] = {{"validity", to_string(c.outcome->validity)}, {"reason", c.outcome->reason},
                    {"warmup_runs", c.outcome->warmup_runs},     {"runs", c.outcome->runs},
                    {"seconds", c.outcome->seconds},             {"ci_ratio", c.outcome->ci_ratio}};
  }
  json ms = json::array();
  for (const auto& m : c.metrics) ms.push_back(to_json(m));
  j["metrics"] = ms;
  if (!c.extra.empty()) j["extra"] = c.extra;
  return j;
}

CaseResult case_from_json(const json& j) {
  CaseResult c;
  c.name = get<std::string>(j, "name");
  c.level = get<std::string>(j, "level");
  c.backend = get<std::string>(j, "backend");
  c.params = get<json>(j, "params");
  c.state = parse_case_state(get<std::string>(j, "state"));
  c.detail = get<std::string>(j, "detail");
  if (j.contains("outcome")) {
    const json& o = j.at("outcome");
    RunOutcome r;
    const auto v = get<std::string>(o, "validity");
    D5_CHECK(v == "VALID" || v == "INVALID", FormatError, "results: validity '{}' is not VALID or INVALID", v);
    r.validity = v == "VALID" ? Validity::Valid : Validity::Invalid;
    r.reason = get<std::string>(o, "reason");
    r.warmup_runs = get<int>(o, "warmup_runs");
    r.runs = get<int>(o, "runs");
    r.seconds = num(o, "seconds");
    r.ci_ratio = o.contains("ci_ratio") && o.at("ci_ratio").is_null() ? INFINITY : num(o, "ci_ratio");
    c.outcome = r;
  }
  for (const auto& m : array(j, "metrics")) c.metrics.push_back(metric_from_json(m));
  if (j.contains("extra")) c.extra = j.at("extra");
  return c;
}

json to_json(const Results& r) {
  json cases = json::array();
  for (const auto& c : r.cases) cases.push_back(to_json(c));
  return {{"schema", kResultsSchemaName}, {"schema_version", kResultsSchemaVersion},
          {"manifest", r.manifest}, {"cases", cases}};
}

Results results_from_json(const json& j) {
  D5_CHECK(j.is_object(), FormatError, "results: the top level is not a JSON object");
  const auto schema = get<std::string>(j, "schema");
  D5_CHECK(schema == kResultsSchemaName, FormatError, "results: schema '{}' is not '{}'", schema,
           kResultsSchemaName);
  const auto version = get<int>(j, "schema_version");
  D5_CHECK(version == kResultsSchemaVersion, FormatError,
           "results: schema_version {} is not supported (this build reads {})", version,
           kResultsSchemaVersion);
  Results r;
  r.manifest = get<json>(j, "manifest");
  for (const auto& c : array(j, "cases")) r.cases.push_back(case_from_json(c));
  return r;
}

void write_results(const std::string& path, const Results& r) {
  const std::string text = to_json(r).dump(2) + "\n";
  atomic_write(path, text);
}

Results read_results(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in.good(), IoError, "cannot open results file '{}'", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    throw FormatError(fmt::format("'{}' is not valid JSON: {}", path, e.what()));
  }
  try {
    return results_from_json(j);
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("'{}': {}", path, e.what()));
  }
}

}  // namespace d5
