#pragma once
// Comparing two result files case by case: the ratio of the new samples to the baseline's with a
// distribution-free confidence interval, a Mann-Whitney U p-value, and a verdict a CI job can
// gate on. docs/compare.md says why these statistics.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/results.h"
#include "deep500/metrics/statistics.h"

namespace d5 {

// The ratio b/a of two positive samples as the Hodges-Lehmann estimate on logarithms: the median
// of all n_a*n_b pairwise ratios b_j / a_i. Its CI is the pair of order statistics of those ratios
// that the Mann-Whitney null distribution picks (Moses/Bauer; Hollander & Wolfe, Nonparametric
// Statistical Methods, sec. 4.3): exact for n_a*n_b <= 10000, normal approximation above. It
// covers the true ratio at the nominal level whenever b is distributed as a scaled a.
struct RatioCI {
  bool available = false;  // false: too few samples for the level, or non-positive samples
  double estimate = 0;     // median of the pairwise ratios (set whenever samples are positive)
  double lower = 0, upper = 0;
  int64_t lower_rank = 0, upper_rank = 0;  // 1-based into the sorted pairwise ratios
  double achieved_level = 0;               // exact coverage when exact, else the nominal level
  bool exact = false;
  bool thinned = false;  // more than 2000 samples on a side: evenly spaced quantiles of it used
  std::string reason;    // why unavailable
};
// Throws InvalidArgument on an empty side, NaN samples or a level outside (0, 1).
RatioCI ratio_ci(std::span<const double> a, std::span<const double> b, double level = 0.95);

enum class Verdict { Faster, Slower, Same, Uncertain };
const char* to_string(Verdict v);

// Which way is better for a metric. Unknown units need the caller to say.
enum class Direction { LowerIsBetter, HigherIsBetter, Unknown };
// "s", "ns", "bytes", "J" are costs (lower is better); rates ("samples/s", "GFLOP/s") are higher.
Direction direction_for_unit(const std::string& unit);

struct CompareOptions {
  std::string metric;           // empty: each case's primary (first) metric
  double level = 0.95;          // of the ratio CI
  double alpha = 0.05;          // significance level of the Mann-Whitney test
  double tolerance = 0.05;      // ratios within [1/(1+t), 1+t] count as the same
  Direction direction = Direction::Unknown;  // Unknown: from the metric's unit
};

struct CaseComparison {
  std::string key;  // name, plus " @ backend" when there is one
  std::string metric, unit;
  Direction direction = Direction::Unknown;
  int64_t n_a = 0, n_b = 0;
  double median_a = 0, median_b = 0;
  RatioCI ratio;  // b / a
  MannWhitneyResult test;
  bool tested = false;
  Verdict verdict = Verdict::Uncertain;
  std::string reason;
};

// The verdict for samples a (baseline) and b (new): SAME when the CI lies within the tolerance
// band; FASTER/SLOWER when the test rejects at alpha, the CI excludes 1 and the estimate is
// outside the band; UNCERTAIN otherwise, with the reason.
CaseComparison compare_samples(std::span<const double> a, std::span<const double> b, Direction direction,
                               const CompareOptions& options);

struct Comparison {
  CompareOptions options;
  std::vector<CaseComparison> cases;  // in the baseline's order
  std::vector<std::string> only_in_a, only_in_b;
  int count(Verdict v) const;
};

// Matches cases by name and backend (a repeated key gets "#2", "#3", ... in order).
Comparison compare_results(const Results& a, const Results& b, const CompareOptions& options);

nlohmann::json to_json(const Comparison& c);
std::string format_comparison(const Comparison& c);  // a console table

}  // namespace d5
