// A GoogleTest binary for check_gtest_skip_report.sh: one case passes, one skips with a reason
// that holds characters CMake lists and XML treat specially, and on request one fails or the
// process aborts before GoogleTest writes its results.
#include <gtest/gtest.h>

#include <cstdlib>

TEST(Probe, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(Probe, SkipsWithAReason) { GTEST_SKIP() << "probe reason; [rank 0] <x> & \"q\""; }

TEST(Probe, FailsWhenAsked) {
  if (std::getenv("D5_PROBE_FAIL") != nullptr) FAIL() << "asked to fail";
}

TEST(Probe, AbortsWhenAsked) {
  if (std::getenv("D5_PROBE_ABORT") != nullptr) std::abort();
}
