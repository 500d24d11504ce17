#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/metrics/statistics.h"

namespace d5 {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> iota_from(double first, int count) {
  std::vector<double> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// ---------------------------------------------------------------------------------------------
// percentile

TEST(Percentile, NearestRankWikipediaExample) {
  // n = 5; rank = ceil(p/100 * 5): p=5 -> 1, p=30 -> ceil(1.5) = 2, p=40 -> 2, p=50 -> 3.
  const std::vector<double> v = {15, 20, 35, 40, 50};
  EXPECT_EQ(percentile(v, 5, PercentileMethod::NearestRank), 15);
  EXPECT_EQ(percentile(v, 30, PercentileMethod::NearestRank), 20);
  EXPECT_EQ(percentile(v, 40, PercentileMethod::NearestRank), 20);
  EXPECT_EQ(percentile(v, 50, PercentileMethod::NearestRank), 35);
  EXPECT_EQ(percentile(v, 100, PercentileMethod::NearestRank), 50);
  EXPECT_EQ(percentile(v, 0, PercentileMethod::NearestRank), 15);  // p = 0 is the minimum
}

TEST(Percentile, NearestRankIsNotPushedUpByRounding) {
  // In doubles 7/100*100 = 7.000000000000001, whose ceiling is 8; the 7th percentile of 1..100
  // is rank 7 exactly. Likewise 28/100*25 rounds above rank 7.
  const auto hundred = iota_from(1, 100);
  EXPECT_EQ(percentile(hundred, 7, PercentileMethod::NearestRank), 7);
  const auto twenty_five = iota_from(1, 25);
  EXPECT_EQ(percentile(twenty_five, 28, PercentileMethod::NearestRank), 7);
  // Just above an integer rank moves to the next sample: ceil(9.05) = 10.
  const auto ten = iota_from(1, 10);
  EXPECT_EQ(percentile(ten, 90, PercentileMethod::NearestRank), 9);
  EXPECT_EQ(percentile(ten, 90.5, PercentileMethod::NearestRank), 10);
}

TEST(Percentile, InterpolatedMatchesNumpyType7) {
  // h = (n - 1) p / 100 = 4p/100; value = x[floor h] + frac(h) * (x[ceil h] - x[floor h]).
  const std::vector<double> v = {15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile(v, 40), 29);    // h = 1.6: 20 + 0.6 * 15
  EXPECT_DOUBLE_EQ(percentile(v, 10), 17);    // h = 0.4: 15 + 0.4 * 5
  EXPECT_DOUBLE_EQ(percentile(v, 75), 40);    // h = 3 exactly
  EXPECT_DOUBLE_EQ(percentile(v, 90), 46);    // h = 3.6: 40 + 0.6 * 10
  EXPECT_EQ(percentile(v, 0), 15);
  EXPECT_EQ(percentile(v, 100), 50);
  const std::vector<double> four = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(four, 50), 2.5);   // h = 1.5
  EXPECT_DOUBLE_EQ(percentile(four, 25), 1.75);  // h = 0.75
}

TEST(Percentile, OrderOfInputDoesNotMatter) {
  const std::vector<double> shuffled = {40, 15, 50, 35, 20};
  EXPECT_DOUBLE_EQ(percentile(shuffled, 40), 29);
  EXPECT_EQ(percentile(shuffled, 30, PercentileMethod::NearestRank), 20);
}

TEST(Percentile, SingleSampleIsEveryPercentile) {
  const std::vector<double> one = {3.5};
  for (double p : {0.0, 1.0, 50.0, 99.9, 100.0}) {
    EXPECT_EQ(percentile(one, p), 3.5);
    EXPECT_EQ(percentile(one, p, PercentileMethod::NearestRank), 3.5);
  }
}

TEST(Percentile, RejectsInvalidInput) {
  const std::vector<double> v = {1, 2, 3};
  EXPECT_THROW(percentile({}, 50), InvalidArgument);
  EXPECT_THROW(percentile(v, -0.1), InvalidArgument);
  EXPECT_THROW(percentile(v, 100.1), InvalidArgument);
  EXPECT_THROW(percentile(v, kNaN), InvalidArgument);
  const std::vector<double> with_nan = {1, kNaN, 3};
  EXPECT_THROW(percentile(with_nan, 50), InvalidArgument);
  EXPECT_THROW(percentile(with_nan, 50, PercentileMethod::NearestRank), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// binomial_half_cdf

TEST(BinomialHalfCdf, ExactSmallValues) {
  // P(B <= 1) for n = 10: (C(10,0) + C(10,1)) / 2^10 = 11/1024.
  EXPECT_NEAR(binomial_half_cdf(1, 10), 11.0 / 1024, 1e-15);
  // sum_{i<=9} C(30,i) = 22964087.
  EXPECT_NEAR(binomial_half_cdf(9, 30), 22964087.0 / 1073741824.0, 1e-15);
  EXPECT_NEAR(binomial_half_cdf(0, 6), 1.0 / 64, 1e-16);
  // 1 + 10 + 45 + 120 + 210 = 386; adding C(10,5) = 252 gives 638 (the symmetric branch).
  EXPECT_NEAR(binomial_half_cdf(4, 10), 386.0 / 1024, 1e-15);
  EXPECT_NEAR(binomial_half_cdf(5, 10), 638.0 / 1024, 1e-15);
  // Odd n: the distribution is symmetric about n/2, so P(B <= 15) for n = 31 is exactly 1/2.
  // The direct sum carries the ~1e-14 absolute error of lgamma(32) = 78.09.
  EXPECT_NEAR(binomial_half_cdf(15, 31), 0.5, 1e-14);
}

TEST(BinomialHalfCdf, OutOfSupport) {
  EXPECT_EQ(binomial_half_cdf(-1, 10), 0);
  EXPECT_EQ(binomial_half_cdf(10, 10), 1);
  EXPECT_EQ(binomial_half_cdf(15, 10), 1);
  EXPECT_EQ(binomial_half_cdf(0, 0), 1);
  EXPECT_THROW(binomial_half_cdf(0, -1), InvalidArgument);
}

TEST(BinomialHalfCdf, StableForLargeN) {
  // n = 2m = 10^6: P(B <= m - 1) = (1 - C(2m, m) / 2^(2m)) / 2, and C(10^6, 5*10^5) / 2^(10^6)
  // = 7.9788436133175009e-4 (exact big-integer division).
  EXPECT_NEAR(binomial_half_cdf(499999, 1000000), (1 - 7.9788436133175009e-4) / 2, 1e-9);
  // Ten standard deviations into the tail (exact big-integer sum: 7.6907775219536759e-24); the
  // relative error is bounded by that of lgamma(10^6 + 1) ~ 1.3e7.
  EXPECT_NEAR(binomial_half_cdf(495000, 1000000) / 7.6907775219536759e-24, 1, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// normal_cdf / normal_quantile

TEST(Normal, CdfKnownValues) {
  EXPECT_EQ(normal_cdf(0), 0.5);
  EXPECT_NEAR(normal_cdf(1.96), 0.9750021048517795, 1e-15);
  EXPECT_NEAR(normal_cdf(-1.96), 1 - 0.9750021048517795, 1e-15);
  // Phi(-10) = 7.6198530241605e-24: the lower tail keeps relative precision.
  EXPECT_NEAR(normal_cdf(-10) / 7.6198530241605e-24, 1, 1e-12);
}

TEST(Normal, QuantileKnownValues) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile(0.025), -1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile(0.995), 2.5758293035489004, 1e-13);
  EXPECT_NEAR(normal_quantile(0.9), 1.2815515655446004, 1e-13);
  EXPECT_NEAR(normal_quantile(0.999), 3.090232306167813, 1e-13);
  // Tail values (Wichura AS241): these exercise the tail branch of the approximation.
  EXPECT_NEAR(normal_quantile(1e-10) / -6.361340902404056, 1, 1e-14);
  EXPECT_NEAR(normal_quantile(1e-300) / -37.0470962993612, 1, 1e-13);
  EXPECT_EQ(normal_quantile(0.5), 0);
}

TEST(Normal, QuantileIsSymmetric) {
  // For p >= 0.5, 1 - p is exact, so the mirror image must agree to the last bit.
  for (double p : {0.5, 0.6, 0.75, 0.9, 0.975, 0.99, 0.999999}) {
    EXPECT_EQ(normal_quantile(p), -normal_quantile(1 - p)) << "p = " << p;
  }
}

TEST(Normal, QuantileInvertsCdf) {
  // Acklam alone is good to ~1e-9 relative. With the Halley step x is within a few ulps, and an
  // ulp of x moves Phi(x) by a relative x^2 * eps, which sets the tolerance.
  constexpr double eps = std::numeric_limits<double>::epsilon();
  for (double p = 1e-300; p < 0.5; p *= 7.3) {
    const double x = normal_quantile(p);
    EXPECT_NEAR(normal_cdf(x) / p, 1, 4 * eps * std::max(1.0, x * x)) << "p = " << p;
  }
  // Only x < 3: above it 1 - Phi(x) is left with too few bits in Phi(x) to invert precisely.
  for (double x : {-8.0, -3.0, -1.0, -0.2, 0.3, 1.5, 2.5}) {
    EXPECT_NEAR(normal_quantile(normal_cdf(x)), x, 1e-13) << "x = " << x;
  }
  // Both sides of the switch between Acklam's central and tail regions at p = 0.02425.
  for (double p : {0.02425, std::nextafter(0.02425, 0.0)}) {
    EXPECT_NEAR(normal_cdf(normal_quantile(p)) / p, 1, 1e-15) << "p = " << p;
  }
}

TEST(Normal, QuantileRejectsOutOfRange) {
  for (double p : {0.0, 1.0, -0.5, 1.5, kNaN}) {
    EXPECT_THROW(normal_quantile(p), InvalidArgument) << "p = " << p;
  }
}

// ---------------------------------------------------------------------------------------------
// median CI

// An available binomial CI with the given ranks; `tail` = P(B <= lower - 1), computed by hand.
::testing::AssertionResult exact_ci_is(const MedianCI& ci, int64_t lower, int64_t upper,
                                       double tail) {
  if (!ci.available) return ::testing::AssertionFailure() << "unavailable: " << ci.reason;
  if (ci.lower_rank != lower || ci.upper_rank != upper) {
    return ::testing::AssertionFailure()
           << "ranks [" << ci.lower_rank << ", " << ci.upper_rank << "]";
  }
  if (std::abs(ci.achieved_level - (1 - 2 * tail)) > 1e-13 || !ci.reason.empty()) {
    return ::testing::AssertionFailure() << "achieved level " << ci.achieved_level;
  }
  return ::testing::AssertionSuccess();
}

TEST(MedianCi, RanksN10) {
  // Binomial(10, 1/2): P(B <= 1) = 11/1024 = 0.0107 <= 0.025 but P(B <= 2) = 56/1024 = 0.0547,
  // so j = 2 and the CI is [x_(2), x_(9)] with coverage 1 - 2 * 11/1024.
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(10), 2, 9, 11.0 / 1024));
  EXPECT_NEAR(median_ci_ranks(10).achieved_level, 0.97852, 1e-5);
}

TEST(MedianCi, RanksN30) {
  // P(B <= 9) = 22964087/2^30 = 0.02139; P(B <= 10) adds C(30,10) = 30045015 -> 0.0494.
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(30), 10, 21, 22964087.0 / 1073741824.0));
}

TEST(MedianCi, SmallestPossibleN) {
  // n = 6: P(B <= 0) = 1/64 = 0.0156 <= 0.025, so the extremes [1, 6] cover 1 - 2/64.
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(6), 1, 6, 1.0 / 64));
  // n = 5: even the extremes cover only 1 - 2/32 = 0.9375 < 0.95.
  const MedianCI five = median_ci_ranks(5);
  EXPECT_FALSE(five.available);
  EXPECT_EQ(five.reason, "median CI at 95% needs at least 6 samples, have 5");
  EXPECT_EQ(median_ci_ranks(0).reason, "median CI at 95% needs at least 6 samples, have 0");
}

TEST(MedianCi, NormalApproximationAbove70) {
  // n = 100: z sqrt(n) = 19.5996; lower = floor(80.4004 / 2) = 40, upper = ceil(1 + 119.5996/2)
  // = ceil(60.7998) = 61; the achieved level is the nominal one.
  const MedianCI ci = median_ci_ranks(100);
  ASSERT_TRUE(ci.available);
  EXPECT_EQ(ci.lower_rank, 40);
  EXPECT_EQ(ci.upper_rank, 61);
  EXPECT_EQ(ci.achieved_level, 0.95);
  // n = 1000: z sqrt(n) = 61.9800; floor(938.02 / 2) = 469, ceil(1 + 1061.98 / 2) = 532.
  const MedianCI big = median_ci_ranks(1000);
  EXPECT_EQ(big.lower_rank, 469);
  EXPECT_EQ(big.upper_rank, 532);
}

TEST(MedianCi, SwitchFromExactToNormalAt70) {
  // n = 70 (exact): P(B <= 26) = sum_{i<=26} C(70,i) / 2^70 = 1527074183185843303 / 2^66
  // = 0.02070 <= 0.025 < P(B <= 27) = 0.03612 -> [27, 44].
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(70), 27, 44, 1527074183185843303.0 / 0x1p66));
  // n = 71 (normal): z sqrt(71) = 16.5150; floor(54.485 / 2) = 27, ceil(1 + 87.515 / 2) = 45.
  const MedianCI normal = median_ci_ranks(71);
  EXPECT_EQ(normal.lower_rank, 27);
  EXPECT_EQ(normal.upper_rank, 45);
  EXPECT_EQ(normal.achieved_level, 0.95);
}

TEST(MedianCi, Level99) {
  // n = 20: cumulative counts 1, 21, 211, 1351, 6196 over 2^20; P(B <= 3) = 0.00129 <= 0.005 but
  // P(B <= 4) = 0.00591 > 0.005, so j = 4 -> [4, 17] with coverage 1 - 2 * 1351 / 2^20.
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(20, 0.99), 4, 17, 1351.0 / 1048576));
  // The extremes need 2^-n <= 0.005: n = 7 gives 0.0078, n = 8 gives 0.0039.
  const MedianCI seven = median_ci_ranks(7, 0.99);
  EXPECT_FALSE(seven.available);
  EXPECT_EQ(seven.reason, "median CI at 99% needs at least 8 samples, have 7");
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(8, 0.99), 1, 8, 1.0 / 256));
}

TEST(MedianCi, TailExactlyAtTheLimitIsAccepted) {
  // level = 1 - 2^-5 makes (1 - level) / 2 = 1/64 = P(B <= 0) for n = 6 exactly; rounding in
  // the CDF must not reject it.
  EXPECT_TRUE(exact_ci_is(median_ci_ranks(6, 0.96875), 1, 6, 1.0 / 64));
  EXPECT_EQ(median_ci_ranks(5, 0.96875).reason,
            "median CI at 96.875% needs at least 6 samples, have 5");
}

TEST(MedianCi, ExactRanksAreTheNarrowestWithEnoughCoverage) {
  // For every exact n: coverage >= nominal, and moving both ranks one step inwards would fall
  // below it (1 - 2 P(B <= j) < level).
  for (double level : {0.9, 0.95, 0.99}) {
    for (int64_t n = 1; n <= 70; ++n) {
      const MedianCI ci = median_ci_ranks(n, level);
      if (!ci.available) continue;
      const int64_t j = ci.lower_rank;
      EXPECT_EQ(ci.upper_rank, n - j + 1);
      EXPECT_GE(ci.achieved_level, level) << "n = " << n;
      if (2 * (j + 1) <= n + 1) {
        EXPECT_LT(1 - 2 * binomial_half_cdf(j, n), level) << "n = " << n;
      }
    }
  }
}

TEST(MedianCi, FromSamples) {
  // 10 samples in reverse order: ranks [2, 9] select the values 2*2 and 2*9.
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(2.0 * i);
  const MedianCI ci = median_ci(v);
  ASSERT_TRUE(ci.available);
  EXPECT_EQ(ci.lower, 4);
  EXPECT_EQ(ci.upper, 18);
  EXPECT_FALSE(median_ci(std::vector<double>{}).available);
}

TEST(MedianCi, RejectsInvalidInput) {
  for (double level : {0.0, 1.0, -0.1, 1.5, kNaN}) {
    EXPECT_THROW(median_ci_ranks(10, level), InvalidArgument) << "level = " << level;
  }
  EXPECT_THROW(median_ci_ranks(-1), InvalidArgument);
  const std::vector<double> with_nan = {1, 2, 3, 4, 5, kNaN};
  EXPECT_THROW(median_ci(with_nan), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// summarize

TEST(Summarize, HandWorkedExample) {
  // Sorted {1, 2, 3, 4, 100}; mean 110/5 = 22. Deviations -21 -20 -19 -18 78, squares
  // 441 + 400 + 361 + 324 + 6084 = 7610, variance 7610/4 = 1902.5.
  // Type 7 with h = 4p/100: q1 (h=1) = 2, q3 (h=3) = 4, p90 (h=3.6) = 4 + 0.6*96 = 61.6,
  // p95 (h=3.8) = 80.8, p99 (h=3.96) = 96.16, p99.9 (h=3.996) = 99.616.
  // Tukey fences [2 - 3, 4 + 3] = [-1, 7]: only 100 is outside.
  const std::vector<double> v = {4, 100, 1, 3, 2};
  const Summary s = summarize(v);
  EXPECT_EQ(s.n, 5);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 22);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(1902.5));
  EXPECT_DOUBLE_EQ(s.cv, std::sqrt(1902.5) / 22);
  EXPECT_EQ(s.median, 3);
  EXPECT_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p90, 61.6);
  EXPECT_DOUBLE_EQ(s.p95, 80.8);
  EXPECT_DOUBLE_EQ(s.p99, 96.16);
  EXPECT_DOUBLE_EQ(s.p999, 99.616);
  EXPECT_EQ(s.q1, 2);
  EXPECT_EQ(s.q3, 4);
  EXPECT_EQ(s.iqr, 2);
  EXPECT_EQ(s.outliers, 1);
  // Five samples are too few for a 95% median CI (see MedianCi.SmallestPossibleN).
  EXPECT_FALSE(s.median_ci.available);
  EXPECT_FALSE(s.median_ci.reason.empty());
}

TEST(Summarize, EvenCountMedianAndCi) {
  // 1..10: median = (5 + 6) / 2; sample variance of 1..n is n(n+1)/12 = 110/12.
  const auto v = iota_from(1, 10);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(110.0 / 12));
  EXPECT_DOUBLE_EQ(s.q1, 3.25);  // h = 2.25
  EXPECT_DOUBLE_EQ(s.q3, 7.75);  // h = 6.75
  EXPECT_EQ(s.outliers, 0);
  ASSERT_TRUE(s.median_ci.available);
  EXPECT_EQ(s.median_ci.lower, 2);  // ranks [2, 9], see MedianCi.RanksN10
  EXPECT_EQ(s.median_ci.upper, 9);
}

TEST(Summarize, SingleSample) {
  const Summary s = summarize(std::vector<double>{7});
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.stddev, 0);  // undefined for n < 2; the contract says 0
  EXPECT_EQ(s.cv, 0);
  EXPECT_EQ(s.p999, 7);
  EXPECT_EQ(s.iqr, 0);
  EXPECT_EQ(s.outliers, 0);
}

TEST(Summarize, ZeroMeanHasZeroCv) {
  // {-1, 1}: mean 0, variance (1 + 1) / 1 = 2.
  const Summary s = summarize(std::vector<double>{-1, 1});
  EXPECT_EQ(s.mean, 0);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(2.0));
  EXPECT_EQ(s.cv, 0);
}

TEST(Summarize, LargeOffsetDoesNotLosePrecision) {
  // sum(x^2) - n mean^2 would cancel ~1e24 against ~1e24; deviations from the mean are exact.
  const Summary s = summarize(std::vector<double>{1e12 + 1, 1e12 + 2, 1e12 + 3});
  EXPECT_EQ(s.mean, 1e12 + 2);
  EXPECT_EQ(s.stddev, 1);
}

TEST(Summarize, MeanIsCorrectedBySecondPass) {
  // The doubles 0.1, 0.2, 0.3 sum to 0.6000000000000000055..., a third of which rounds to 0.2;
  // the plain sum / n gives 0.20000000000000004 because the sum itself is rounded up.
  EXPECT_EQ(summarize(std::vector<double>{0.1, 0.2, 0.3}).mean, 0.2);
}

TEST(Summarize, TukeyFencesAreInclusive) {
  // {1, 2, 3, 4, 7}: q1 = 2, q3 = 4, fences [-1, 7]; 7 sits on the fence and is no outlier.
  EXPECT_EQ(summarize(std::vector<double>{1, 2, 3, 4, 7}).outliers, 0);
  // {-10, 1, 2, 3, 4}: q1 = 1, q3 = 3, fences [-2, 6]; -10 is a low outlier.
  EXPECT_EQ(summarize(std::vector<double>{-10, 1, 2, 3, 4}).outliers, 1);
}

TEST(Summarize, RejectsInvalidInput) {
  EXPECT_THROW(summarize(std::vector<double>{}), InvalidArgument);
  EXPECT_THROW(summarize(std::vector<double>{1, kNaN}), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// mann_whitney_u

// The example of the scipy.stats.mannwhitneyu documentation (Shier 2004).
const std::vector<double> kMales = {19, 22, 16, 29, 24};
const std::vector<double> kFemales = {20, 11, 17, 12};

TEST(MannWhitney, ExactScipyExample) {
  // Pairs with x > y: 19 beats 3, 22 beats 4, 16 beats 2, 29 and 24 beat 4 each -> 17.
  // U distribution for (5, 4): counts of U = 0..3 are 1, 1, 2, 3 (partitions in a 5x4 box), so
  // P(U >= 17) = P(U <= 3) = 7/126 and the two-sided p = 14/126.
  const MannWhitneyResult r = mann_whitney_u(kMales, kFemales);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u_x, 17);
  EXPECT_EQ(r.u_y, 3);
  EXPECT_EQ(r.z, 0);
  EXPECT_NEAR(r.p_value, 0.1111111111111111, 1e-15);
  // Swapping the samples swaps the statistics, not the two-sided p-value.
  const MannWhitneyResult swapped = mann_whitney_u(kFemales, kMales);
  EXPECT_EQ(swapped.u_x, 3);
  EXPECT_NEAR(swapped.p_value, 14.0 / 126, 1e-15);
}

TEST(MannWhitney, AsymptoticScipyExample) {
  // mu = 20/2 = 10, sigma^2 = 20/12 * 10 = 50/3; z = (17 - 10 - 0.5) / sqrt(50/3) = 1.5921683;
  // p = 2 (1 - Phi(z)) = 0.11134688653314041 (scipy, method='asymptotic').
  const MannWhitneyResult r = mann_whitney_u(kMales, kFemales, MannWhitneyMethod::Asymptotic);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u_x, 17);
  EXPECT_NEAR(r.z, 6.5 / std::sqrt(50.0 / 3), 1e-14);
  EXPECT_NEAR(r.p_value, 0.11134688653314041, 1e-14);
  // The continuity correction moves toward the mean from below as well: (3 - 10 + 0.5).
  const MannWhitneyResult swapped =
      mann_whitney_u(kFemales, kMales, MannWhitneyMethod::Asymptotic);
  EXPECT_NEAR(swapped.z, -6.5 / std::sqrt(50.0 / 3), 1e-14);
  EXPECT_NEAR(swapped.p_value, 0.11134688653314041, 1e-14);
}

TEST(MannWhitney, TiesUseTheCorrectedNormalApproximation) {
  // Pooled {1x, 2x 2x 2y, 3x 3y, 4y, 5y}: u_x = 0 + 2 * (0 + 1/2) + 1 * (1 + 1/2) = 2.5.
  // Tie groups of 3 and 2: T = (27 - 3) + (8 - 2) = 30; n = 8.
  // sigma^2 = 16/12 * (9 - 30/56) = 11.2857142857; z = -(8 - 2.5 - 0.5) / sigma = -1.4883514;
  // p = 2 (1 - Phi(1.4883514)) = 0.1366582477381475.
  const std::vector<double> x = {1, 2, 2, 3}, y = {2, 3, 4, 5};
  const MannWhitneyResult r = mann_whitney_u(x, y);
  EXPECT_FALSE(r.exact);  // ties rule out the exact distribution
  EXPECT_EQ(r.u_x, 2.5);
  EXPECT_EQ(r.u_y, 13.5);
  EXPECT_NEAR(r.z, -5 / std::sqrt(16.0 / 12 * (9 - 30.0 / 56)), 1e-14);
  EXPECT_NEAR(r.z, -1.4883513944689681, 1e-12);
  EXPECT_NEAR(r.p_value, 0.1366582477381475, 1e-14);
}

TEST(MannWhitney, ForcedExactWithTiesTruncatesU) {
  // As scipy: U = max(2.5, 13.5) = 13.5 is truncated to 13; for (4, 4) the counts of U = 0..3
  // are 1, 1, 2, 3, so p = 2 P(U <= 3) = 2 * 7/70 = 0.2.
  const std::vector<double> x = {1, 2, 2, 3}, y = {2, 3, 4, 5};
  const MannWhitneyResult r = mann_whitney_u(x, y, MannWhitneyMethod::Exact);
  EXPECT_TRUE(r.exact);
  EXPECT_NEAR(r.p_value, 0.2, 1e-15);
}

TEST(MannWhitney, AllTiedGivesPOfOne) {
  // Every value equal: T = n^3 - n makes sigma exactly 0; there is no evidence of a shift.
  const std::vector<double> x = {5, 5, 5}, y = {5, 5};
  const MannWhitneyResult r = mann_whitney_u(x, y);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u_x, 3);
  EXPECT_EQ(r.u_y, 3);
  EXPECT_EQ(r.z, 0);
  EXPECT_EQ(r.p_value, 1);
}

TEST(MannWhitney, PValueIsCappedAtOne) {
  // x = {1, 4}, y = {2, 3}: u_x = 2 = mu. Exact: (2, 2) counts of U = 0..4 are 1 1 2 1 1, so
  // 2 P(U >= 2) = 8/6 -> capped at 1.
  const std::vector<double> x = {1, 4}, y = {2, 3};
  EXPECT_EQ(mann_whitney_u(x, y).p_value, 1);
  // Asymptotic with U half a step from the mean: the correction removes all distance.
  const MannWhitneyResult r =
      mann_whitney_u(std::vector<double>{2}, std::vector<double>{1}, MannWhitneyMethod::Asymptotic);
  EXPECT_EQ(r.u_x, 1);
  EXPECT_EQ(r.z, 0);
  EXPECT_EQ(r.p_value, 1);
}

TEST(MannWhitney, CompleteSeparationAt20x20) {
  // Only one of the C(40, 20) = 137846528820 orderings puts all x above all y, so the
  // two-sided p is 2 / 137846528820.
  const auto y = iota_from(0, 20), x = iota_from(100, 20);
  const MannWhitneyResult r = mann_whitney_u(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u_x, 400);
  EXPECT_NEAR(r.p_value / (2.0 / 137846528820.0), 1, 1e-12);
}

// 2 P(U >= u_max) by enumerating every placement of the m x ranks among m + n positions.
double brute_force_p(int m, int n, double u_max) {
  int64_t at_least = 0, total = 0;
  for (uint32_t mask = 0; mask < (1u << (m + n)); ++mask) {
    if (std::popcount(mask) != m) continue;
    ++total;
    int u = 0, y_below = 0;
    for (int pos = 0; pos < m + n; ++pos) {
      if (mask & (1u << pos)) {
        u += y_below;
      } else {
        ++y_below;
      }
    }
    if (u >= u_max) ++at_least;
  }
  return std::min(1.0, 2 * static_cast<double>(at_least) / static_cast<double>(total));
}

TEST(MannWhitney, ExactMatchesEnumeration) {
  // Every arrangement of (m, n) ranks: the DP distribution must reproduce the enumeration.
  for (auto [m, n] : {std::pair{6, 5}, std::pair{3, 8}, std::pair{1, 7}}) {
    for (uint32_t mask = 0; mask < (1u << (m + n)); ++mask) {
      if (std::popcount(mask) != m) continue;
      std::vector<double> x, y;
      for (int pos = 0; pos < m + n; ++pos) (mask & (1u << pos) ? x : y).push_back(pos);
      const MannWhitneyResult r = mann_whitney_u(x, y);
      ASSERT_TRUE(r.exact);
      const double u_max = std::max(r.u_x, r.u_y);
      ASSERT_NEAR(r.p_value, brute_force_p(m, n, u_max), 1e-14) << m << "x" << n << " " << mask;
    }
  }
}

TEST(MannWhitney, AutoChoosesExactOnlyForSmallTieFreeSamples) {
  const auto method_is_exact = [](int nx, int ny) {
    // Interleaved halves keep every value distinct.
    std::vector<double> x, y;
    for (int i = 0; i < nx; ++i) x.push_back(2.0 * i);
    for (int i = 0; i < ny; ++i) y.push_back(2.0 * i + 1);
    return mann_whitney_u(x, y).exact;
  };
  EXPECT_TRUE(method_is_exact(20, 20));
  EXPECT_FALSE(method_is_exact(21, 20));
  EXPECT_FALSE(method_is_exact(21, 9));
  EXPECT_TRUE(method_is_exact(50, 8));   // min 8 and 50 * 8 = 400
  EXPECT_FALSE(method_is_exact(51, 8));  // 408 > 400
  EXPECT_TRUE(method_is_exact(3, 100));
}

TEST(MannWhitney, RejectsInvalidInput) {
  const std::vector<double> ok = {1, 2};
  EXPECT_THROW(mann_whitney_u(std::vector<double>{}, ok), InvalidArgument);
  EXPECT_THROW(mann_whitney_u(ok, std::vector<double>{}), InvalidArgument);
  EXPECT_THROW(mann_whitney_u(ok, std::vector<double>{1, kNaN}), InvalidArgument);
  EXPECT_THROW(mann_whitney_u(std::vector<double>{kNaN}, ok), InvalidArgument);
  const auto big = iota_from(0, 101), other = iota_from(0.5, 100);
  EXPECT_THROW(mann_whitney_u(big, other, MannWhitneyMethod::Exact), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// geometric_mean

TEST(GeometricMean, KnownValues) {
  EXPECT_DOUBLE_EQ(geometric_mean(std::vector<double>{2, 8}), 4);  // sqrt(16)
  // (1 * 2 * 4 * 8)^(1/4) = 64^(1/4) = 2 sqrt(2).
  EXPECT_DOUBLE_EQ(geometric_mean(std::vector<double>{1, 2, 4, 8}), 2 * std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(geometric_mean(std::vector<double>{5}), 5);
  // Scale-invariant where the arithmetic mean is not: speedups 0.5 and 2 average to 1.
  EXPECT_DOUBLE_EQ(geometric_mean(std::vector<double>{0.5, 2}), 1);
}

TEST(GeometricMean, RejectsNonPositive) {
  EXPECT_THROW(geometric_mean(std::vector<double>{}), InvalidArgument);
  EXPECT_THROW(geometric_mean(std::vector<double>{1, 0}), InvalidArgument);
  EXPECT_THROW(geometric_mean(std::vector<double>{1, -2}), InvalidArgument);
  EXPECT_THROW(geometric_mean(std::vector<double>{1, kNaN}), InvalidArgument);
}

}  // namespace
}  // namespace d5
