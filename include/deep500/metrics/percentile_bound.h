#pragma once
// An upper confidence bound on a percentile, distribution-free, as MLPerf LoadGen's early
// stopping uses it (docs/serve-bench.md#statistics): from n samples, the order statistic x_(k)
// (1-based, ascending) with the smallest k such that P(Binomial(n, p) <= k - 1) >= confidence.
// Then P(x_(k) >= the true p-quantile) >= confidence whatever the distribution: x_(k) falls short
// of the quantile only when at most k - 1 samples lie below it. With too few samples no k <= n
// qualifies and there is no bound: a p90 at 99% confidence needs 44 samples (1 - 0.9^44 >= 0.99).
#include <cstdint>
#include <span>
#include <string>

namespace d5 {

struct PercentileBound {
  bool available = false;
  double p = 0, confidence = 0;
  int64_t n = 0;
  int64_t rank = 0;      // k, 1-based into the ascending samples; 0 when unavailable
  double value = 0;      // x_(k)
  double achieved = 0;   // P(Binomial(n, p) <= k - 1), at least `confidence`
  int64_t min_samples = 0;  // the fewest samples for which a bound exists at (p, confidence)
  std::string reason;    // why unavailable
};

// P(X <= k) for X ~ Binomial(n, p), in log space (stable for n up to 1e7). 0 for k < 0, 1 for k >= n.
double binomial_cdf(int64_t k, int64_t n, double p);

// The fewest samples for which an upper bound on the p-quantile exists at `confidence`:
// the smallest n with 1 - p^n >= confidence. InvalidArgument unless 0 < p < 1 and 0 < confidence < 1.
int64_t min_samples_for_percentile_bound(double p, double confidence);

// The bound for `samples` in any order (they are sorted internally). InvalidArgument on NaN.
PercentileBound percentile_upper_bound(std::span<const double> samples, double p, double confidence = 0.99);

}  // namespace d5
