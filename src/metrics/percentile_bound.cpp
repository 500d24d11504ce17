#include "deep500/metrics/percentile_bound.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

void check_levels(double p, double confidence) {
  D5_CHECK_ARG(p > 0 && p < 1, "percentile bound: the percentile must lie in (0, 1), got {}", p);
  D5_CHECK_ARG(confidence > 0 && confidence < 1, "percentile bound: the confidence must lie in (0, 1), got {}",
               confidence);
}

}  // namespace

double binomial_cdf(int64_t k, int64_t n, double p) {
  D5_CHECK_ARG(n >= 0, "binomial CDF: n must be >= 0, got {}", n);
  D5_CHECK_ARG(p >= 0 && p <= 1, "binomial CDF: p must lie in [0, 1], got {}", p);
  if (k < 0) return 0;
  if (k >= n) return 1;
  if (p == 0) return 1;
  if (p == 1) return 0;
  const double nd = static_cast<double>(n), lp = std::log(p), lq = std::log1p(-p);
  double sum = 0;
  for (int64_t i = 0; i <= k; ++i) {
    const double id = static_cast<double>(i);
    sum += std::exp(std::lgamma(nd + 1) - std::lgamma(id + 1) - std::lgamma(nd - id + 1) + id * lp + (nd - id) * lq);
  }
  return std::min(sum, 1.0);
}

int64_t min_samples_for_percentile_bound(double p, double confidence) {
  check_levels(p, confidence);
  // x_(n) bounds the quantile with probability 1 - p^n: the first n where that reaches confidence.
  auto n = static_cast<int64_t>(std::ceil(std::log1p(-confidence) / std::log(p)));
  while (n > 1 && 1 - std::pow(p, static_cast<double>(n - 1)) >= confidence) --n;  // rounding at the edge
  while (1 - std::pow(p, static_cast<double>(n)) < confidence) ++n;
  return std::max<int64_t>(n, 1);
}

PercentileBound percentile_upper_bound(std::span<const double> samples, double p, double confidence) {
  check_levels(p, confidence);
  PercentileBound b;
  b.p = p;
  b.confidence = confidence;
  b.n = static_cast<int64_t>(samples.size());
  b.min_samples = min_samples_for_percentile_bound(p, confidence);
  for (double v : samples) D5_CHECK_ARG(!std::isnan(v), "percentile bound: a sample is NaN");
  if (b.n < b.min_samples) {
    b.reason = fmt::format("{} sample(s); an upper bound on the p{:g} at {:g}% confidence needs at least {}", b.n,
                           100 * p, 100 * confidence, b.min_samples);
    return b;
  }
  // The CDF grows with k: one pass over the pmf finds the first k with P(X <= k - 1) >= confidence.
  const double nd = static_cast<double>(b.n), lp = std::log(p), lq = std::log1p(-p);
  double cdf = 0;
  int64_t k = 0;
  while (k < b.n) {
    const double id = static_cast<double>(k);
    cdf += std::exp(std::lgamma(nd + 1) - std::lgamma(id + 1) - std::lgamma(nd - id + 1) + id * lp + (nd - id) * lq);
    ++k;  // cdf is now P(X <= k - 1)
    if (cdf >= confidence) break;
  }
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  b.available = true;
  b.rank = k;
  b.value = sorted[static_cast<size_t>(k - 1)];
  b.achieved = std::min(cdf, 1.0);
  return b;
}

}  // namespace d5
