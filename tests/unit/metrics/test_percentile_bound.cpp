// Upper confidence bounds on percentiles (LoadGen's early stopping): ranks against exact binomial
// sums (Python's math.comb, recorded below), the minimum sample counts by hand, and the coverage
// the bound promises, by simulation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/metrics/percentile_bound.h"
#include "deep500/metrics/statistics.h"

namespace d5 {
namespace {

std::vector<double> ramp(int64_t n) {  // 1, 2, ..., n in a scrambled order: x_(k) = k
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>((i * 7919) % n + 1));
  return v;
}

TEST(PercentileBound, MinimumSamplesAreTheFirstNWhoseMaximumBoundsTheQuantile) {
  // 0.9^43 = 0.0108 > 0.01 >= 0.9^44 = 0.0097; 0.99^458 = 0.01002, 0.99^459 = 0.00992; 0.5^5 = 0.031.
  EXPECT_EQ(min_samples_for_percentile_bound(0.9, 0.99), 44);
  EXPECT_EQ(min_samples_for_percentile_bound(0.99, 0.99), 459);
  EXPECT_EQ(min_samples_for_percentile_bound(0.5, 0.95), 5);
  EXPECT_THROW(min_samples_for_percentile_bound(1.0, 0.99), InvalidArgument);
  EXPECT_THROW(min_samples_for_percentile_bound(0.9, 0.0), InvalidArgument);
}

TEST(PercentileBound, RanksMatchExactBinomialSums) {
  // The smallest k with sum_{i<k} C(n,i) p^i (1-p)^(n-i) >= c, by math.comb in Python:
  // (n, p, c) -> (k, that sum).
  struct Case {
    int64_t n;
    double p, c;
    int64_t k;
    double achieved;
  };
  for (const Case& t : {Case{100, 0.9, 0.99, 97, 0.9921635128788155}, Case{44, 0.9, 0.99, 44, 0.9903022627021248},
                        Case{1000, 0.99, 0.99, 998, 0.9973205680062086}, Case{200, 0.5, 0.95, 113, 0.9615811839343698}}) {
    const PercentileBound b = percentile_upper_bound(ramp(t.n), t.p, t.c);
    ASSERT_TRUE(b.available) << t.n;
    EXPECT_EQ(b.rank, t.k) << t.n;
    EXPECT_EQ(b.value, static_cast<double>(t.k)) << t.n;  // x_(k) of 1..n
    EXPECT_NEAR(b.achieved, t.achieved, 1e-9) << t.n;
  }
  const PercentileBound few = percentile_upper_bound(ramp(43), 0.9, 0.99);
  EXPECT_FALSE(few.available);
  EXPECT_EQ(few.min_samples, 44);
  EXPECT_NE(few.reason.find("43 sample(s); an upper bound on the p90 at 99% confidence needs at least 44"),
            std::string::npos)
      << few.reason;
}

TEST(PercentileBound, BinomialCdfAgreesWithTheHalfCdfAndTheEdges) {
  for (int64_t n : {1, 7, 40, 301})
    for (int64_t k = -1; k <= n; ++k) EXPECT_NEAR(binomial_cdf(k, n, 0.5), binomial_half_cdf(k, n), 1e-12) << n << " " << k;
  EXPECT_EQ(binomial_cdf(3, 10, 0.0), 1.0);
  EXPECT_EQ(binomial_cdf(3, 10, 1.0), 0.0);
  EXPECT_NEAR(binomial_cdf(0, 10, 0.1), std::pow(0.9, 10), 1e-15);
}

// The promise: the bound lies at or above the true p90 in at least 99% of experiments. Uniform
// samples on [0, 1): the true p90 is 0.9. 20,000 experiments of 60 samples: the coverage is the
// achieved level (0.9920 at n = 60) within 3 standard deviations (0.0019).
TEST(PercentileBound, CoversTheTrueQuantileAtTheConfidenceLevel) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  int covered = 0;
  double achieved = 0;
  const int experiments = 20000;
  for (int e = 0; e < experiments; ++e) {
    std::vector<double> x(60);
    for (auto& v : x) v = u(rng);
    const PercentileBound b = percentile_upper_bound(x, 0.9, 0.99);
    ASSERT_TRUE(b.available);
    achieved = b.achieved;
    covered += b.value >= 0.9;
  }
  const double coverage = static_cast<double>(covered) / experiments;
  EXPECT_GE(achieved, 0.99);
  EXPECT_NEAR(coverage, achieved, 3 * std::sqrt(achieved * (1 - achieved) / experiments)) << coverage;
}

}  // namespace
}  // namespace d5
