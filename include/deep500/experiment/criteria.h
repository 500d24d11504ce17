#pragma once
// Acceptance criteria of a recipe: "final_test_accuracy >= 0.97", "time_to_target reached",
// "wall_time <= 600". Each is checked on every case of a run's results (docs/recipes.md lists
// what a quantity may name) and ends PASS or FAIL with the value that decided it.
#include <optional>
#include <string>

#include "deep500/metrics/results.h"

namespace d5 {

struct Criterion {
  std::string text;      // as written
  std::string quantity;  // an extra key path, a metric (optionally .statistic), or wall_time
  std::string op;        // ">=", "<=", ">", "<", "==", "!=", or "reached"
  double threshold = 0;
};
// Throws FormatError naming the text when it is not QUANTITY OP NUMBER or QUANTITY reached.
Criterion parse_criterion(const std::string& text);

struct CriterionResult {
  std::string criterion;
  bool passed = false;
  std::optional<double> value;  // the deciding (worst) value, when there is one
  std::string detail;           // the case that decided, or why there was no value
};

// Checks `c` on every case that ran (SKIPPED and UNIMPLEMENTED cases did not); `wall_time` is the
// run's wall time in seconds.
CriterionResult evaluate(const Criterion& c, const Results& results, double wall_time_s);
// For criteria over a whole recipe, where only wall_time has a value.
CriterionResult evaluate_wall_time(const Criterion& c, double wall_time_s);

// `quantity` in a run's results, as criteria look it up: the worst value over the cases that ran
// (the largest when lower is better). None when a case has no value or no case ran.
std::optional<double> worst_value(const Results& results, const std::string& quantity, bool lower_is_better);

// The implicit criterion of every run: no case FAILED. A MISTRUSTED case (the reference could not
// judge it, e.g. a gradient through a kink that rounding put on different sides) makes the run
// INVALID instead, with the case's reason: not evidence of a wrong result, not a result to trust.
CriterionResult no_failed_cases(const Results& results);

// "NAME on BACKEND", or the name alone for a case without a backend (d5 data bench's).
std::string case_label(const CaseResult& c);

}  // namespace d5
