#include "deep500/train/quality_target.h"

#include <cmath>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"
#include "deep500/train/quality.h"

namespace d5 {

namespace {

constexpr const char* kSyntax = "write MEASURE OP NUMBER with OP one of >= > <= <, e.g. \"accuracy>=0.97\"";

const char* symbol(QualityTarget::Comparison c) {
  switch (c) {
    case QualityTarget::Comparison::at_least: return ">=";
    case QualityTarget::Comparison::above: return ">";
    case QualityTarget::Comparison::at_most: return "<=";
    case QualityTarget::Comparison::below: return "<";
  }
  return "?";
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// A target the measure's range rules out, or one that points against its direction.
void check_reachable(const QualityTarget& t, const QualityMeasure& m, std::string_view text) {
  using C = QualityTarget::Comparison;
  const bool upward = t.comparison == C::at_least || t.comparison == C::above;
  D5_CHECK_ARG(upward == m.higher_is_better(),
               "target \"{}\": {} is better when {}; write {}{}{}", text, m.name(),
               m.higher_is_better() ? "higher" : "lower", m.name(), m.higher_is_better() ? ">=" : "<=", t.threshold);
  const double lo = m.lowest(), hi = m.highest();
  const bool possible = t.comparison == C::at_least ? t.threshold <= hi
                        : t.comparison == C::above  ? t.threshold < hi
                        : t.comparison == C::at_most ? t.threshold >= lo
                                                     : t.threshold > lo;
  D5_CHECK_ARG(possible, "target \"{}\" can never be met: {} lies in [{}, {}]", text, m.name(), lo,
               std::isinf(hi) ? std::string("infinity") : fmt::format("{}", hi));
}

}  // namespace

bool QualityTarget::met_by(double value) const {
  switch (comparison) {
    case Comparison::at_least: return value >= threshold;
    case Comparison::above: return value > threshold;
    case Comparison::at_most: return value <= threshold;
    case Comparison::below: return value < threshold;
  }
  return false;
}

std::string QualityTarget::to_string() const { return fmt::format("{}{}{}", measure, symbol(comparison), threshold); }

QualityTarget parse_target_syntax(std::string_view text) {
  const size_t at = text.find_first_of("<>");
  D5_CHECK_ARG(at != std::string_view::npos, "target \"{}\" has no comparison; {}", text, kSyntax);
  QualityTarget t;
  t.measure = std::string(trimmed(text.substr(0, at)));
  const bool or_equal = at + 1 < text.size() && text[at + 1] == '=';
  t.comparison = text[at] == '>' ? (or_equal ? QualityTarget::Comparison::at_least : QualityTarget::Comparison::above)
                                 : (or_equal ? QualityTarget::Comparison::at_most : QualityTarget::Comparison::below);
  const std::string_view number = trimmed(text.substr(at + (or_equal ? 2 : 1)));
  D5_CHECK_ARG(!t.measure.empty(), "target \"{}\" names no measure; {}", text, kSyntax);
  const std::optional<double> v = parse_double(number);
  D5_CHECK_ARG(v && std::isfinite(*v), "target \"{}\": '{}' is not a finite number; {}", text, number, kSyntax);
  t.threshold = *v;
  return t;
}

QualityTarget parse_quality_target(std::string_view text) {
  QualityTarget t = parse_target_syntax(text);
  check_reachable(t, *make_quality_measure(t.measure), text);
  return t;
}

QualityTarget accuracy_target(double fraction) {
  QualityTarget t;
  t.measure = "accuracy";
  t.threshold = fraction;
  D5_CHECK_ARG(fraction > 0 && fraction <= 1, "target accuracy {} is not a fraction in (0, 1]", fraction);
  return t;
}

}  // namespace d5
