#include "deep500/metrics/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstddef>
#include <numbers>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

constexpr double kInvSqrt2 = std::numbers::sqrt2 / 2;  // halving is exact, so correctly rounded

// Largest n for which median CI ranks come from the exact binomial distribution.
constexpr int64_t kExactMedianCiMaxN = 70;

// Binomial tail probabilities are compared against (1 - level) / 2. Both sides can be exactly
// equal in rational arithmetic (level = 1 - 2^-5, n = 6); rounding in the log-space CDF must not
// turn that equality into a rejection.
constexpr double kTailRelTol = 1e-10;

// Cost of the exact Mann-Whitney distribution grows as (n_x * n_y)^2.
constexpr int64_t kExactMannWhitneyMaxProduct = 10000;

void check_no_nan(std::span<const double> samples, const char* what) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    D5_CHECK_ARG(!std::isnan(samples[i]),
                 "{}: sample {} is NaN; drop failed or missing measurements before computing "
                 "statistics",
                 what, i);
  }
}

std::vector<double> sorted_checked(std::span<const double> samples, const char* what) {
  D5_CHECK_ARG(!samples.empty(), "{}: needs at least one sample, got an empty set", what);
  check_no_nan(samples, what);
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void check_level(double level) {
  D5_CHECK_ARG(level > 0 && level < 1,
               "confidence level must be in (0, 1), e.g. 0.95 for 95%; got {}", level);
}

bool tail_within(double probability, double tail) {
  return probability <= tail * (1 + kTailRelTol);
}

double percentile_sorted(const std::vector<double>& sorted, double p, PercentileMethod method) {
  const std::size_t n = sorted.size();
  if (method == PercentileMethod::NearestRank) {
    // p * n before dividing: exact for integral p and moderate n, so a rank that lands on an
    // integer is not pushed to the next one by the rounding of p / 100.
    const double rank = std::ceil(p * static_cast<double>(n) / 100.0);
    const auto r = static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(n)));
    return sorted[r - 1];
  }
  const double h = static_cast<double>(n - 1) * p / 100.0;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= n) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  // Equal neighbours (or infinities) must come back unchanged, not through arithmetic.
  if (frac == 0 || sorted[lo] == sorted[lo + 1]) return sorted[lo];
  return std::lerp(sorted[lo], sorted[lo + 1], frac);
}

// Smallest n for which the extreme ranks [1, n] reach the requested coverage, i.e. the smallest
// n with P(B <= 0) = 2^-n <= tail. Always <= 54 because tail >= 2^-54 for any double level < 1.
int64_t min_samples_for_median_ci(double tail) {
  int64_t n = 1;
  while (!tail_within(std::ldexp(1.0, static_cast<int>(-n)), tail)) ++n;
  return n;
}

MedianCI median_ci_sorted(const std::vector<double>& sorted, double level) {
  MedianCI ci = median_ci_ranks(static_cast<int64_t>(sorted.size()), level);
  if (ci.available) {
    ci.lower = sorted[static_cast<std::size_t>(ci.lower_rank - 1)];
    ci.upper = sorted[static_cast<std::size_t>(ci.upper_rank - 1)];
  }
  return ci;
}

// Acklam's rational approximation for p in (0, 0.5], followed by one Halley step. Restricting
// to the lower half keeps normal_cdf(x) - p free of cancellation (both are small numbers).
double normal_quantile_lower(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double p_low = 0.02425;

  double x;
  if (p < p_low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // Halley step on f(x) = Phi(x) - p; u = f / phi(x).
  const double e = normal_cdf(x) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  // Deep in the tail exp() overflows; the unrefined value is then the best available.
  if (std::isfinite(u)) x -= u / (1 + x * u / 2);
  return x;
}

// Counts U = (pairs with x > y) and the tie statistics of the pooled sample.
struct PooledRanks {
  double u_x = 0;
  long double tie_term = 0;  // sum over tie groups of t^3 - t
  bool ties = false;
};

PooledRanks pool(std::span<const double> x, std::span<const double> y) {
  std::vector<std::pair<double, bool>> all;  // (value, is_x)
  all.reserve(x.size() + y.size());
  for (double v : x) all.emplace_back(v, true);
  for (double v : y) all.emplace_back(v, false);
  std::sort(all.begin(), all.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });

  PooledRanks r;
  double y_below = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    double in_x = 0, in_y = 0;
    for (; j < all.size() && all[j].first == all[i].first; ++j) (all[j].second ? in_x : in_y) += 1;
    // Each x of the group beats every y below it and half of the y it ties with.
    r.u_x += in_x * (y_below + in_y / 2);
    const auto t = static_cast<long double>(j - i);
    if (j - i > 1) {
      r.ties = true;
      r.tie_term += t * t * t - t;
    }
    y_below += in_y;
    i = j;
  }
  return r;
}

// 2 * P(U >= floor(u_max)) under the null hypothesis, for sample sizes m and n.
double exact_mann_whitney_p(int64_t m, int64_t n, double u_max) {
  if (m < n) std::swap(m, n);  // the distribution is symmetric in (m, n); keep the table small
  // By symmetry of U about m*n/2, P(U >= c) = P(U <= m*n - c): only counts up to k are needed.
  const int64_t k = m * n - static_cast<int64_t>(std::floor(u_max));
  const auto width = static_cast<std::size_t>(k + 1);
  // f[j][u]: number of orderings of i x's and j y's with U = u, for the current i. Adding the
  // largest element: an x beats all j y's (shift by j), a y beats nothing.
  std::vector<std::vector<double>> f(static_cast<std::size_t>(n + 1),
                                     std::vector<double>(width, 0.0));
  for (auto& row : f) row[0] = 1;  // i = 0: every y-only ordering has U = 0
  for (int64_t i = 1; i <= m; ++i) {
    for (std::size_t j = 1; j < f.size(); ++j) {
      auto& cur = f[j];
      const auto& prev_j = f[j - 1];
      // Descending u so cur[u - j] still holds the count for i - 1.
      for (std::size_t u = width; u-- > 0;) {
        cur[u] = (u >= j ? cur[u - j] : 0.0) + prev_j[u];
      }
    }
  }
  double favourable = 0;
  for (double c : f.back()) favourable += c;
  double total = 1;  // C(m + n, n); step i yields C(m + i, i), exact while below 2^53
  for (int64_t i = 1; i <= n; ++i) {
    total = total * static_cast<double>(m + i) / static_cast<double>(i);
  }
  return std::min(1.0, 2 * favourable / total);
}

}  // namespace

double percentile(std::span<const double> samples, double p, PercentileMethod method) {
  D5_CHECK_ARG(p >= 0 && p <= 100, "percentile: p must be in [0, 100], got {}", p);
  return percentile_sorted(sorted_checked(samples, "percentile"), p, method);
}

MedianCI median_ci_ranks(int64_t n, double level) {
  check_level(level);
  D5_CHECK_ARG(n >= 0, "median CI: the sample count must be >= 0, got {}", n);
  const double tail = (1 - level) / 2;
  MedianCI ci;
  if (n > kExactMedianCiMaxN) {
    const double nd = static_cast<double>(n);
    const double spread = normal_quantile(1 - tail) * std::sqrt(nd);
    const double lower = std::floor((nd - spread) / 2);
    const double upper = std::ceil(1 + (nd + spread) / 2);
    ci.lower_rank = static_cast<int64_t>(std::clamp(lower, 1.0, nd));
    ci.upper_rank = static_cast<int64_t>(std::clamp(upper, 1.0, nd));
    ci.achieved_level = level;
    ci.available = true;
    return ci;
  }
  // Largest j with P(B <= j - 1) <= tail; the CDF grows with j, so stop at the first failure.
  // j <= n - j + 1 keeps the ranks ordered (implied by tail < 1/2, checked for clarity).
  int64_t j = 0;
  double below = 0;
  for (int64_t cand = 1; 2 * cand <= n + 1; ++cand) {
    const double cdf = binomial_half_cdf(cand - 1, n);
    if (!tail_within(cdf, tail)) break;
    j = cand;
    below = cdf;
  }
  if (j == 0) {
    ci.reason = fmt::format("median CI at {:g}% needs at least {} samples, have {}", level * 100,
                            min_samples_for_median_ci(tail), n);
    return ci;
  }
  ci.lower_rank = j;
  ci.upper_rank = n - j + 1;
  ci.achieved_level = 1 - 2 * below;
  ci.available = true;
  return ci;
}

MedianCI median_ci(std::span<const double> samples, double level) {
  check_level(level);
  check_no_nan(samples, "median CI");
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return median_ci_sorted(sorted, level);
}

Summary summarize(std::span<const double> samples) {
  const std::vector<double> sorted = sorted_checked(samples, "summarize");
  const std::size_t n = sorted.size();
  const double nd = static_cast<double>(n);

  Summary s;
  s.n = static_cast<int64_t>(n);
  s.min = sorted.front();
  s.max = sorted.back();

  // Corrected two-pass: the second pass fixes the rounding error of the first mean, and the
  // variance never subtracts two large sums of squares.
  double sum = 0;
  for (double v : sorted) sum += v;
  double mean = sum / nd;
  double dev_sum = 0, dev_sq = 0;
  for (double v : sorted) {
    const double d = v - mean;
    dev_sum += d;
    dev_sq += d * d;
  }
  mean += dev_sum / nd;
  s.mean = mean;
  if (n >= 2) s.stddev = std::sqrt(std::max(0.0, (dev_sq - dev_sum * dev_sum / nd) / (nd - 1)));
  s.cv = mean != 0 ? s.stddev / mean : 0;

  const auto at = [&](double p) {
    return percentile_sorted(sorted, p, PercentileMethod::Interpolated);
  };
  s.p50 = at(50);
  s.median = s.p50;
  s.p90 = at(90);
  s.p95 = at(95);
  s.p99 = at(99);
  s.p999 = at(99.9);
  s.q1 = at(25);
  s.q3 = at(75);
  s.iqr = s.q3 - s.q1;

  const double low_fence = s.q1 - 1.5 * s.iqr, high_fence = s.q3 + 1.5 * s.iqr;
  const auto below = std::lower_bound(sorted.begin(), sorted.end(), low_fence) - sorted.begin();
  const auto above = sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), high_fence);
  s.outliers = static_cast<int64_t>(below + above);

  s.median_ci = median_ci_sorted(sorted, 0.95);
  return s;
}

MannWhitneyResult mann_whitney_u(std::span<const double> x, std::span<const double> y,
                                 MannWhitneyMethod method) {
  D5_CHECK_ARG(!x.empty() && !y.empty(),
               "Mann-Whitney U: both samples need at least one value, got {} and {}", x.size(),
               y.size());
  check_no_nan(x, "Mann-Whitney U (x)");
  check_no_nan(y, "Mann-Whitney U (y)");
  const auto nx = static_cast<int64_t>(x.size()), ny = static_cast<int64_t>(y.size());
  const PooledRanks pooled = pool(x, y);

  MannWhitneyResult r;
  r.u_x = pooled.u_x;
  r.u_y = static_cast<double>(nx * ny) - pooled.u_x;

  if (method == MannWhitneyMethod::Auto) {
    const bool small = (nx <= 20 && ny <= 20) || (std::min(nx, ny) <= 8 && nx * ny <= 400);
    method = !pooled.ties && small ? MannWhitneyMethod::Exact : MannWhitneyMethod::Asymptotic;
  }

  if (method == MannWhitneyMethod::Exact) {
    D5_CHECK_ARG(nx * ny <= kExactMannWhitneyMaxProduct,
                 "Mann-Whitney U: the exact method is limited to n_x * n_y <= {}, got {} * {}; "
                 "use MannWhitneyMethod::Asymptotic or Auto",
                 kExactMannWhitneyMaxProduct, nx, ny);
    r.exact = true;
    r.p_value = exact_mann_whitney_p(nx, ny, std::max(r.u_x, r.u_y));
    return r;
  }

  // sigma^2 = nx ny / 12 * ((n + 1) - T / (n (n - 1))), rearranged so that the bracket is an
  // integer (exact in long double): all values tied gives exactly 0 rather than rounding noise.
  const auto n = static_cast<long double>(nx + ny);
  const long double spread = n * n * n - n - pooled.tie_term;
  if (spread <= 0) {
    r.p_value = 1;  // every value tied: no evidence either way
    return r;
  }
  const double sigma = std::sqrt(static_cast<double>(
      static_cast<long double>(nx) * static_cast<long double>(ny) * spread / (12 * n * (n - 1))));
  const double diff = r.u_x - static_cast<double>(nx * ny) / 2;
  // Continuity correction: move U half a step toward the mean, never past it.
  const double corrected = std::max(std::abs(diff) - 0.5, 0.0);
  r.z = corrected == 0 ? 0.0 : std::copysign(corrected / sigma, diff);
  r.p_value = std::min(1.0, std::erfc(std::abs(r.z) * kInvSqrt2));  // 2 * (1 - Phi(|z|))
  return r;
}

double mann_whitney_null_cdf(int64_t n_x, int64_t n_y, int64_t u) {
  D5_CHECK_ARG(n_x > 0 && n_y > 0, "Mann-Whitney U: sample sizes must be positive, got {} and {}", n_x, n_y);
  D5_CHECK_ARG(n_x * n_y <= kExactMannWhitneyMaxProduct,
               "Mann-Whitney U: the exact distribution is limited to n_x * n_y <= {}, got {} * {}",
               kExactMannWhitneyMaxProduct, n_x, n_y);
  const int64_t total = n_x * n_y;
  if (u < 0) return 0;
  if (u >= total) return 1;
  // exact_mann_whitney_p(c) = 2 P(U >= c) = 2 P(U <= total - c) by symmetry; it counts the
  // lower tail only, so ask for the smaller side and complement when u is in the upper half.
  if (2 * u < total) return exact_mann_whitney_p(n_x, n_y, static_cast<double>(total - u)) / 2;
  return 1 - exact_mann_whitney_p(n_x, n_y, static_cast<double>(u + 1)) / 2;
}

double geometric_mean(std::span<const double> values) {
  D5_CHECK_ARG(!values.empty(), "geometric mean: needs at least one value, got an empty set");
  double log_sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    D5_CHECK_ARG(values[i] > 0,
                 "geometric mean: value {} is {}; it is defined only for positive values", i,
                 values[i]);
    log_sum += std::log(values[i]);
  }
  return std::exp(log_sum / static_cast<double>(values.size()));
}

double normal_quantile(double p) {
  D5_CHECK_ARG(p > 0 && p < 1, "normal quantile: p must be in (0, 1), got {}", p);
  // 1 - p is exact for p in [0.5, 1), so the upper half mirrors the lower half exactly.
  return p <= 0.5 ? normal_quantile_lower(p) : -normal_quantile_lower(1 - p);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x * kInvSqrt2); }

double binomial_half_cdf(int64_t k, int64_t n) {
  D5_CHECK_ARG(n >= 0, "binomial CDF: n must be >= 0, got {}", n);
  if (k < 0) return 0;
  if (k >= n) return 1;
  // Sum the shorter tail: below n / 2 the terms shrink monotonically away from k.
  if (2 * k >= n) return 1 - binomial_half_cdf(n - k - 1, n);
  const double nd = static_cast<double>(n);
  const double log_head = std::lgamma(nd + 1) - nd * std::numbers::ln2;
  double sum = 0;
  for (int64_t i = k; i >= 0; --i) {
    const double id = static_cast<double>(i);
    const double term = std::exp(log_head - std::lgamma(id + 1) - std::lgamma(nd - id + 1));
    sum += term;
    if (term < sum * 1e-20) break;  // the remaining terms cannot change the double result
  }
  return sum;
}

std::optional<double> median_counting_failures(std::vector<double> reached, size_t runs) {
  D5_CHECK_ARG(reached.size() <= runs, "{} runs reached the target out of only {}", reached.size(), runs);
  if (2 * reached.size() <= runs) return std::nullopt;
  reached.resize(runs, std::numeric_limits<double>::infinity());
  std::sort(reached.begin(), reached.end());
  const size_t n = reached.size();
  return n % 2 ? reached[n / 2] : 0.5 * (reached[n / 2 - 1] + reached[n / 2]);
}

std::optional<double> olympic_mean(std::vector<double> reached, size_t runs, std::string* why) {
  D5_CHECK_ARG(reached.size() <= runs, "{} runs reached the target out of only {}", reached.size(), runs);
  auto refuse = [&](std::string reason) -> std::optional<double> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (runs < 3) return refuse(fmt::format("needs at least 3 runs to drop the fastest and the slowest, has {}", runs));
  const size_t failed = runs - reached.size();
  if (failed > 1)
    return refuse(fmt::format("{} of {} runs did not reach the target; the score drops only one", failed, runs));
  std::sort(reached.begin(), reached.end());
  reached.erase(reached.begin());              // the fastest
  if (failed == 0) reached.pop_back();         // the slowest, unless the failed run was it
  double sum = 0;
  for (double v : reached) sum += v;
  return sum / static_cast<double>(reached.size());
}

}  // namespace d5
