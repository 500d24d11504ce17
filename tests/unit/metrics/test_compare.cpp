// d5 compare's statistics on samples with known answers: the Mann-Whitney null distribution, the
// ratio CI's ranks and coverage, verdicts, and matching cases between result files.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "deep500/metrics/compare.h"
#include "deep500/core/error.h"

namespace d5 {
namespace {

std::vector<double> scaled(const std::vector<double>& x, double c) {
  std::vector<double> y;
  for (double v : x) y.push_back(v * c);
  return y;
}

std::vector<double> lognormal(size_t n, double median, double sigma, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::lognormal_distribution<double> d(std::log(median), sigma);
  std::vector<double> x(n);
  for (auto& v : x) v = d(gen);
  return x;
}

TEST(MannWhitneyNull, MatchesCountedOrderingsForFiveAndFive) {
  // C(10, 5) = 252 orderings; U = 0, 1, 2, 3 are reached by 1, 1, 2, 3 of them.
  EXPECT_NEAR(mann_whitney_null_cdf(5, 5, 0), 1.0 / 252, 1e-15);
  EXPECT_NEAR(mann_whitney_null_cdf(5, 5, 2), 4.0 / 252, 1e-15);
  EXPECT_NEAR(mann_whitney_null_cdf(5, 5, 3), 7.0 / 252, 1e-15);
  EXPECT_NEAR(mann_whitney_null_cdf(5, 5, 12), 0.5, 1e-15);  // symmetric about 12.5
  EXPECT_NEAR(mann_whitney_null_cdf(5, 5, 22), 1 - 4.0 / 252, 1e-15);
  EXPECT_EQ(mann_whitney_null_cdf(5, 5, -1), 0.0);
  EXPECT_EQ(mann_whitney_null_cdf(5, 5, 25), 1.0);
  EXPECT_NEAR(mann_whitney_null_cdf(3, 4, 0), 1.0 / 35, 1e-15);
  EXPECT_THROW(mann_whitney_null_cdf(200, 200, 3), InvalidArgument);
}

TEST(RatioCI, ExactRanksAndBoundsForFiveAndFive) {
  const std::vector<double> a = {1, 2, 3, 4, 5};
  const RatioCI r = ratio_ci(a, scaled(a, 2));
  ASSERT_TRUE(r.available) << r.reason;
  EXPECT_TRUE(r.exact);
  // P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252: the 3rd and 23rd of 25 ratios, 96.8% coverage.
  EXPECT_EQ(r.lower_rank, 3);
  EXPECT_EQ(r.upper_rank, 23);
  EXPECT_NEAR(r.achieved_level, 1 - 8.0 / 252, 1e-12);
  // Pairwise ratios are 2 j / i; sorted, the 3rd is 2 * 1/3 and the 23rd 2 * 3.
  EXPECT_NEAR(r.estimate, 2, 1e-12);
  EXPECT_NEAR(r.lower, 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.upper, 6, 1e-12);
}

TEST(RatioCI, TooFewSamplesOrNonPositiveSamplesHaveNoInterval) {
  const std::vector<double> three = {1, 2, 3};
  const RatioCI r = ratio_ci(three, three);  // P(U <= 0) = 1/20 > 0.025
  EXPECT_FALSE(r.available);
  EXPECT_NE(r.reason.find("too few"), std::string::npos);
  const std::vector<double> four = {1, 2, 3, 4};
  EXPECT_TRUE(ratio_ci(four, four).available);  // 1/70 <= 0.025
  const std::vector<double> zero = {0, 1, 2, 3, 4};
  EXPECT_FALSE(ratio_ci(zero, four).available);
  EXPECT_THROW(ratio_ci({}, four), InvalidArgument);
  const std::vector<double> nan = {1, NAN, 2};
  EXPECT_THROW(ratio_ci(nan, four), InvalidArgument);
}

// Coverage of the true ratio when b is a scaled, independent draw of a's distribution: within
// four binomial standard deviations of the level (2000 trials: sd 0.005).
void expect_coverage(size_t n, double level_tolerance) {
  int covered = 0, trials = 2000;
  double achieved = 0;
  for (int t = 0; t < trials; ++t) {
    const auto a = lognormal(n, 1e-3, 0.3, 2 * t + 1);
    const auto b = scaled(lognormal(n, 1e-3, 0.3, 2 * t + 2), 1.3);
    const RatioCI r = ratio_ci(a, b);
    ASSERT_TRUE(r.available);
    achieved = r.achieved_level;
    covered += r.lower <= 1.3 && 1.3 <= r.upper;
  }
  EXPECT_NEAR(static_cast<double>(covered) / trials, achieved, level_tolerance) << "n = " << n;
}

TEST(RatioCI, CoversTheTrueRatioAtTheExactLevel) { expect_coverage(10, 0.02); }
TEST(RatioCI, CoversTheTrueRatioAtTheNominalLevelWithTheNormalApproximation) { expect_coverage(60, 0.02); }

TEST(RatioCI, ThinsLargeSamplesToQuantiles) {
  const auto a = lognormal(3000, 1.0, 0.1, 7);
  const RatioCI r = ratio_ci(a, scaled(a, 1.5));
  EXPECT_TRUE(r.thinned);
  EXPECT_NEAR(r.estimate, 1.5, 1e-9);
  EXPECT_LT(r.lower, 1.5);
  EXPECT_GT(r.upper, 1.5);
  EXPECT_LT(r.upper / r.lower, 1.02);  // 2000 samples per side of sigma 0.1: a tight interval
}

TEST(CompareSamples, VerdictsForKnownShifts) {
  const CompareOptions o;  // tolerance 5%, alpha 0.05
  const auto a = lognormal(30, 1e-3, 0.05, 1);
  const auto b = lognormal(30, 1e-3, 0.05, 2);
  EXPECT_EQ(compare_samples(a, scaled(b, 1.5), Direction::LowerIsBetter, o).verdict, Verdict::Slower);
  EXPECT_EQ(compare_samples(a, scaled(b, 1 / 1.5), Direction::LowerIsBetter, o).verdict, Verdict::Faster);
  // For a rate the same numbers mean the opposite.
  EXPECT_EQ(compare_samples(a, scaled(b, 1.5), Direction::HigherIsBetter, o).verdict, Verdict::Faster);
  const CaseComparison same = compare_samples(a, scaled(a, 1.001), Direction::LowerIsBetter, o);
  EXPECT_EQ(same.verdict, Verdict::Same) << same.reason;
  EXPECT_NEAR(same.ratio.estimate, 1.001, 1e-12);
  // Four wide samples each and a 3% shift: nothing can be said.
  const auto wa = lognormal(4, 1e-3, 0.5, 3), wb = lognormal(4, 1e-3 * 1.03, 0.5, 4);
  const CaseComparison u = compare_samples(wa, wb, Direction::LowerIsBetter, o);
  EXPECT_EQ(u.verdict, Verdict::Uncertain);
  EXPECT_NE(u.reason.find("more samples"), std::string::npos) << u.reason;
  // Unknown direction never decides.
  EXPECT_EQ(compare_samples(a, scaled(b, 1.5), Direction::Unknown, o).verdict, Verdict::Uncertain);
}

TEST(CompareSamples, ASmallSignificantShiftWithinATightToleranceIsSlower) {
  CompareOptions o;
  o.tolerance = 0.01;
  const auto a = lognormal(200, 1e-3, 0.02, 5);
  const auto b = scaled(lognormal(200, 1e-3, 0.02, 6), 1.03);
  const CaseComparison c = compare_samples(a, b, Direction::LowerIsBetter, o);
  EXPECT_EQ(c.verdict, Verdict::Slower) << c.reason;
  EXPECT_LT(c.test.p_value, 1e-6);
  EXPECT_GT(c.ratio.lower, 1.01);
  o.tolerance = 0.10;  // the same data is within a 10% tolerance
  EXPECT_EQ(compare_samples(a, b, Direction::LowerIsBetter, o).verdict, Verdict::Same);
}

TEST(DirectionForUnit, CostsAndRates) {
  EXPECT_EQ(direction_for_unit("s"), Direction::LowerIsBetter);
  EXPECT_EQ(direction_for_unit("bytes"), Direction::LowerIsBetter);
  EXPECT_EQ(direction_for_unit("samples/s"), Direction::HigherIsBetter);
  EXPECT_EQ(direction_for_unit("GFLOP/s"), Direction::HigherIsBetter);
  EXPECT_EQ(direction_for_unit("fraction"), Direction::Unknown);
}

CaseResult timed_case(const std::string& name, const std::string& backend, std::vector<double> samples) {
  CaseResult c;
  c.name = name;
  c.backend = backend;
  c.metrics.push_back(MetricRecord{"time", "s", std::move(samples), std::nullopt, true, "", nlohmann::json::object()});
  return c;
}

TEST(CompareResults, MatchesCasesByNameAndBackend) {
  const auto x = lognormal(20, 1e-3, 0.05, 11), y = lognormal(20, 1e-3, 0.05, 12);
  Results a, b;
  a.cases = {timed_case("gemm", "reference", x), timed_case("gemm", "onednn", x), timed_case("conv", "onednn", x)};
  b.cases = {timed_case("gemm", "onednn", scaled(y, 2)), timed_case("gemm", "reference", scaled(y, 0.5)),
             timed_case("rnn", "onednn", y)};
  const Comparison c = compare_results(a, b, {});
  ASSERT_EQ(c.cases.size(), 2u);
  EXPECT_EQ(c.cases[0].key, "gemm @ reference");
  EXPECT_EQ(c.cases[0].verdict, Verdict::Faster);
  EXPECT_EQ(c.cases[1].key, "gemm @ onednn");
  EXPECT_EQ(c.cases[1].verdict, Verdict::Slower);
  EXPECT_EQ(c.only_in_a, std::vector<std::string>{"conv @ onednn"});
  EXPECT_EQ(c.only_in_b, std::vector<std::string>{"rnn @ onednn"});
  const auto j = to_json(c);
  EXPECT_EQ(j["summary"]["slower"], 1);
  EXPECT_EQ(j["cases"][1]["verdict"], "SLOWER");
  EXPECT_NEAR(j["cases"][1]["ratio"]["estimate"].get<double>(), 2, 0.1);
}

TEST(CompareResults, AFailedCaseOrAMissingMetricIsUncertain) {
  const auto x = lognormal(20, 1e-3, 0.05, 13);
  Results a, b;
  a.cases = {timed_case("gemm", "onednn", x), timed_case("conv", "onednn", x)};
  b.cases = {timed_case("gemm", "onednn", scaled(x, 3)), timed_case("conv", "onednn", x)};
  b.cases[0].state = CaseState::Failed;
  b.cases[0].detail = "max error 0.3";
  b.cases[1].metrics[0].name = "latency";
  const Comparison c = compare_results(a, b, {});
  EXPECT_EQ(c.cases[0].verdict, Verdict::Uncertain);
  EXPECT_NE(c.cases[0].reason.find("FAILED: max error 0.3"), std::string::npos);
  EXPECT_EQ(c.cases[1].verdict, Verdict::Uncertain);
  EXPECT_NE(c.cases[1].reason.find("'time' is missing in the new result"), std::string::npos);
}

}  // namespace
}  // namespace d5
