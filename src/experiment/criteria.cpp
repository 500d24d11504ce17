#include "deep500/experiment/criteria.h"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {

constexpr const char* kSyntax =
    "write QUANTITY OP NUMBER (OP one of >= <= > < == !=) or QUANTITY reached, e.g. "
    "'final_test_accuracy >= 0.97' or 'time_to_target reached'";

bool holds(const std::string& op, double v, double t) {
  if (op == ">=") return v >= t;
  if (op == "<=") return v <= t;
  if (op == ">") return v > t;
  if (op == "<") return v < t;
  if (op == "==") return v == t;
  return v != t;
}

std::optional<double> number(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
  if (j.is_number()) return j.get<double>();
  return std::nullopt;
}

std::optional<double> extra_value(const nlohmann::json& extra, const std::string& path) {
  const nlohmann::json* at = &extra;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object() || !at->contains(key)) return std::nullopt;
    at = &(*at)[key];
    if (dot == std::string::npos) return number(*at);
    start = dot + 1;
  }
}

std::optional<double> statistic(const MetricRecord& m, const std::string& stat) {
  if (m.samples.empty() || !m.summary) return std::nullopt;
  const Summary& s = *m.summary;
  if (stat == "median") return s.median;
  if (stat == "mean") return s.mean;
  if (stat == "min") return s.min;
  if (stat == "max") return s.max;
  if (stat == "p90") return s.p90;
  if (stat == "p95") return s.p95;
  if (stat == "p99") return s.p99;
  if (stat == "first") return m.samples.front();
  if (stat == "last") return m.samples.back();
  if (stat == "n") return static_cast<double>(s.n);
  if (stat == "ci_upper" && s.median_ci.available) return s.median_ci.upper;
  if (stat == "ci_lower" && s.median_ci.available) return s.median_ci.lower;
  return std::nullopt;
}

// A case's value of `quantity`: its extra facts first, then its metrics.
std::optional<double> case_value(const CaseResult& c, const std::string& quantity) {
  if (auto v = extra_value(c.extra, quantity)) return v;
  const size_t dot = quantity.find('.');
  const std::string name = quantity.substr(0, dot);
  const std::string stat = dot == std::string::npos ? "median" : quantity.substr(dot + 1);
  for (const auto& m : c.metrics)
    if (m.name == name) return statistic(m, stat);
  return std::nullopt;
}

bool ran(const CaseResult& c) { return c.state != CaseState::Skipped && c.state != CaseState::Unimplemented; }

}  // namespace

std::string case_label(const CaseResult& c) { return c.backend.empty() ? c.name : c.name + " on " + c.backend; }

Criterion parse_criterion(const std::string& text) {
  static const std::regex compare(R"(^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$)");
  static const std::regex reached(R"(^\s*([A-Za-z_][\w.]*)\s+reached\s*$)");
  std::smatch m;
  Criterion c;
  c.text = text;
  if (std::regex_match(text, m, reached)) {
    c.quantity = m[1];
    c.op = "reached";
    return c;
  }
  if (!std::regex_match(text, m, compare)) D5_THROW(FormatError, "criterion '{}': {}", text, kSyntax);
  c.quantity = m[1];
  c.op = m[2];
  const auto t = parse_double(m[3].str());
  if (!t) D5_THROW(FormatError, "criterion '{}': '{}' is not a number; {}", text, m[3].str(), kSyntax);
  c.threshold = *t;
  return c;
}

std::optional<double> worst_value(const Results& results, const std::string& quantity, bool lower_is_better) {
  std::optional<double> worst;
  for (const auto& cs : results.cases) {
    if (!ran(cs)) continue;
    const std::optional<double> v = case_value(cs, quantity);
    if (!v || !std::isfinite(*v)) return std::nullopt;
    if (!worst || (lower_is_better ? *v > *worst : *v < *worst)) worst = v;
  }
  return worst;
}

CriterionResult evaluate_wall_time(const Criterion& c, double wall_time_s) {
  CriterionResult r;
  r.criterion = c.text;
  if (c.quantity != "wall_time") {
    r.detail = fmt::format("'{}' has no value for a whole recipe (only wall_time has)", c.quantity);
    return r;
  }
  r.value = wall_time_s;
  r.passed = c.op == "reached" || holds(c.op, wall_time_s, c.threshold);
  r.detail = fmt::format("wall time {:.1f} s", wall_time_s);
  return r;
}

CriterionResult evaluate(const Criterion& c, const Results& results, double wall_time_s) {
  if (c.quantity == "wall_time") return evaluate_wall_time(c, wall_time_s);
  CriterionResult r;
  r.criterion = c.text;
  int checked = 0;
  for (const auto& cs : results.cases) {
    if (!ran(cs)) continue;
    ++checked;
    const std::optional<double> v = case_value(cs, c.quantity);
    if (c.op == "reached") {
      if (!v || !std::isfinite(*v) || *v == 0) {
        r.detail = fmt::format("{}: {} not reached{}", case_label(cs), c.quantity,
                               cs.detail.empty() ? "" : " (" + cs.detail + ")");
        return r;
      }
      r.value = *v;
      continue;
    }
    if (!v) {
      r.detail = fmt::format("{}: no value '{}' (neither an extra key nor a metric with samples)", case_label(cs),
                             c.quantity);
      return r;
    }
    // The worst value decides: the smallest for a lower bound, the largest for an upper bound.
    const bool lower_bound = c.op == ">=" || c.op == ">";
    if (!r.value || (lower_bound ? *v < *r.value : *v > *r.value)) {
      r.value = *v;
      r.detail = case_label(cs);
    }
    if (!holds(c.op, *v, c.threshold)) {
      r.value = *v;
      r.detail = fmt::format("{}: {} = {:.6g}", case_label(cs), c.quantity, *v);
      return r;
    }
  }
  if (checked == 0) {
    r.detail = "no case ran";
    return r;
  }
  r.passed = true;
  r.detail = r.value ? fmt::format("{}: {:.6g}{}", c.quantity, *r.value, checked > 1 ? " (worst case)" : "")
                     : fmt::format("{} case(s)", checked);
  return r;
}

CriterionResult no_failed_cases(const Results& results) {
  CriterionResult r;
  r.criterion = "no case FAILED";
  int bad = 0;
  for (const auto& c : results.cases) {
    if (c.state != CaseState::Failed) continue;
    if (bad++ == 0)
      r.detail = fmt::format("{} {}{}", case_label(c), to_string(c.state), c.detail.empty() ? "" : ": " + c.detail);
  }
  r.passed = bad == 0;
  r.value = bad;
  if (bad > 1) r.detail += fmt::format(" (and {} more)", bad - 1);
  if (bad == 0) r.detail = fmt::format("{} case(s)", results.cases.size());
  return r;
}

}  // namespace d5
