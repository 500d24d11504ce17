#pragma once
// Statistics over raw samples. Nothing here invents a number: when a quantity is undefined for
// the given samples (too few, empty, non-positive for a geometric mean) the result says so.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace d5 {

enum class PercentileMethod {
  NearestRank,   // the smallest sample with at least p% of samples <= it (no interpolation)
  Interpolated,  // linear interpolation between closest ranks (Hyndman & Fan type 7, NumPy default)
};

// p in [0, 100]. Throws InvalidArgument on an empty span, p outside [0, 100] or NaN samples.
double percentile(std::span<const double> samples, double p,
                  PercentileMethod method = PercentileMethod::Interpolated);

// Confidence interval of the median (Le Boudec, "Performance Evaluation of Computer and
// Communication Systems", 2010, Thm. 2.1; Hoefler & Belli, SC15). Ranks are 1-based into the
// sorted samples. For n <= 70 the ranks come from the exact binomial(n, 1/2) distribution;
// above that from the normal approximation
//   lower = floor((n - z*sqrt(n)) / 2),  upper = ceil(1 + (n + z*sqrt(n)) / 2).
// When n is too small for the requested level (e.g. n < 6 at 95%) `available` is false and
// `reason` says how many samples are needed.
struct MedianCI {
  bool available = false;
  double lower = 0, upper = 0;
  int64_t lower_rank = 0, upper_rank = 0;  // 1-based
  double achieved_level = 0;  // exact coverage when computed from the binomial, else the nominal
  std::string reason;
};
// Throws InvalidArgument on NaN samples or a level outside (0, 1); an empty span is unavailable.
MedianCI median_ci(std::span<const double> samples, double level = 0.95);
// The ranks alone, for a given n; exposed so they can be checked against published tables.
// `lower`/`upper` stay 0. Throws InvalidArgument on n < 0.
MedianCI median_ci_ranks(int64_t n, double level = 0.95);

struct Summary {
  int64_t n = 0;
  double min = 0, max = 0, mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for n < 2
  double cv = 0;      // stddev / mean; 0 when the mean is 0
  double median = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0;  // interpolated (type 7)
  double q1 = 0, q3 = 0, iqr = 0;
  int64_t outliers = 0;  // Tukey: outside [q1 - 1.5 iqr, q3 + 1.5 iqr]
  MedianCI median_ci;    // 95%
};
// Throws InvalidArgument on an empty span or on NaN samples.
Summary summarize(std::span<const double> samples);

// Times to a target over `runs` repetitions (seeds), of which only `reached` got there.
// The median counting a run that never reached the target as infinitely slow: defined only while
// more than half reached it.
std::optional<double> median_counting_failures(std::vector<double> reached, size_t runs);
// MLPerf training's olympic score: the mean after dropping the fastest and the slowest run, a run
// that never reached the target being the slowest. Defined for at least three runs of which at
// most one failed; otherwise nullopt and `why` says which rule it broke.
std::optional<double> olympic_mean(std::vector<double> reached, size_t runs, std::string* why = nullptr);

// Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of x against y.
// u_x counts pairs with x > y (ties count 1/2); u_y = n_x*n_y - u_x.
// Exact p-value (the permutation distribution of U) when there are no ties and
// n_x, n_y <= 20 (or min <= 8 and n_x*n_y <= 400); otherwise the normal approximation with tie
// correction and continuity correction. Matches scipy.stats.mannwhitneyu(x, y,
// alternative='two-sided', method='exact' | 'asymptotic') respectively.
// Throws InvalidArgument on an empty x or y or on NaN samples.
enum class MannWhitneyMethod {
  Auto,        // the rule above
  Exact,       // always exact; like scipy, ties are not corrected for and a half-integer U is
               // truncated. Limited to n_x*n_y <= 10000 (the distribution costs (n_x*n_y)^2).
  Asymptotic,  // always the normal approximation
};
struct MannWhitneyResult {
  double u_x = 0, u_y = 0;
  double z = 0;  // 0 for the exact method; signed, > 0 when x tends to be larger than y
  double p_value = 1;
  bool exact = false;
};
MannWhitneyResult mann_whitney_u(std::span<const double> x, std::span<const double> y,
                                 MannWhitneyMethod method = MannWhitneyMethod::Auto);
// P(U <= u) under the null hypothesis (no ties), exact: the permutation distribution of U for
// sample sizes n_x and n_y. Limited like the exact test to n_x*n_y <= 10000 (InvalidArgument).
double mann_whitney_null_cdf(int64_t n_x, int64_t n_y, int64_t u);

// exp(mean(log(x))); throws InvalidArgument if any value is <= 0 or the span is empty.
double geometric_mean(std::span<const double> values);

// Standard normal quantile (inverse CDF), p in (0, 1). Accurate to ~1e-15 (Acklam + one
// Halley refinement step). Throws InvalidArgument outside (0, 1).
double normal_quantile(double p);
// Standard normal CDF.
double normal_cdf(double x);
// P(X <= k) for X ~ Binomial(n, 1/2), computed in log space (stable for n up to 1e6).
// 0 for k < 0, 1 for k >= n; throws InvalidArgument on n < 0.
double binomial_half_cdf(int64_t k, int64_t n);

}  // namespace d5
