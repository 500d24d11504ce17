// deep500's operator against the library called directly (deep500/op/op_overhead.h): the ratio
// per round is the two sides' medians, outputs that differ are never compared, and what cannot be
// compared says why.
#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/error.h"
#include "deep500/op/op_overhead.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/suites.h"

namespace d5 {
namespace {

const Problem& gemm(std::string_view name) {
  static const std::vector<Problem> all = load_suite("deepbench-gemm-training", 0x5eed);
  for (const auto& p : all)
    if (p.name.ends_with(name)) return p;
  throw std::runtime_error("no problem " + std::string(name));
}

OverheadSettings quick() { return {.rounds = 6, .round_seconds = 0.002, .min_us = 0}; }

class OpOverhead : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_operators();
    const auto b = find_backend("onednn");
    if (!b || !b->available) GTEST_SKIP() << "the onednn backend is not built (libdnnl-dev), the native side to compare";
  }
};

TEST_F(OpOverhead, RatioPerRoundIsTheTwoSidesMedians) {
  const Problem& p = gemm("m1760n16k1760_NN");
  auto op = OpRegistry::global().create(p.spec, "onednn");
  const OverheadMeasurement m = measure_op_overhead("onednn", p, *op, quick());
  ASSERT_EQ(m.outcome, OverheadMeasurement::Outcome::Measured) << m.why;
  ASSERT_EQ(m.ratios.size(), 6u);
  ASSERT_EQ(m.d5_seconds.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_GT(m.native_seconds[i], 0);
    EXPECT_DOUBLE_EQ(m.ratios[i], m.d5_seconds[i] / m.native_seconds[i]);
  }
  EXPECT_EQ(m.timing, "steady_clock");
  EXPECT_NE(m.native_implementation.find("matmul"), std::string::npos) << m.native_implementation;
  EXPECT_EQ(m.d5_implementation, op->implementation());
}

// A_transposed * B on inputs meant for A * B: the same shapes (A is square), another result.
TEST_F(OpOverhead, OutputsThatDifferAreNeverCompared) {
  const Problem& nn = gemm("m1760n16k1760_NN");
  auto wrong = OpRegistry::global().create(gemm("m1760n16k1760_TN").spec, "onednn");
  const OverheadMeasurement m = measure_op_overhead("onednn", nn, *wrong, quick());
  EXPECT_EQ(m.outcome, OverheadMeasurement::Outcome::OutputsDiffer);
  EXPECT_NE(m.why.find("outputs differ"), std::string::npos) << m.why;
  EXPECT_GT(m.max_abs_difference, 1.0);
  EXPECT_TRUE(m.ratios.empty());
}

TEST_F(OpOverhead, WhatCannotBeComparedSaysWhy) {
  const Problem& p = gemm("m1760n16k1760_NN");
  auto op = OpRegistry::global().create(p.spec, "onednn");
  OverheadSettings s = quick();
  s.min_us = 1e9;
  const OverheadMeasurement short_call = measure_op_overhead("onednn", p, *op, s);
  EXPECT_EQ(short_call.outcome, OverheadMeasurement::Outcome::TooShort);
  EXPECT_NE(short_call.why.find("too short"), std::string::npos) << short_call.why;

  auto reference = OpRegistry::global().create(p.spec, "reference");
  const OverheadMeasurement none = measure_op_overhead("reference", p, *reference, quick());
  EXPECT_EQ(none.outcome, OverheadMeasurement::Outcome::NoNative);
  EXPECT_NE(none.why.find("wraps no library"), std::string::npos) << none.why;

  s = quick();
  s.rounds = 5;
  EXPECT_THROW(measure_op_overhead("onednn", p, *op, s), InvalidArgument);
}

}  // namespace
}  // namespace d5
