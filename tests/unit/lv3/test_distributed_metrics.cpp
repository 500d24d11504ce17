// The summary of every rank's metrics: spread and load imbalance.
#include <gtest/gtest.h>

#include "deep500/dist/distributed_metrics.h"
#include "deep500/core/error.h"

namespace d5 {
namespace {

nlohmann::json rank(int r, double compute, double comm, double bytes) {
  return {{"rank", r}, {"compute_s", compute}, {"communication_s", comm}, {"data_time_s", 0.0},
          {"bytes_per_step", bytes}};
}

TEST(DistributedSummary, SpreadAndImbalanceOverRanks) {
  const nlohmann::json ranks = {rank(0, 2.0, 1.0, 100), rank(1, 4.0, 1.0, 100), rank(2, 3.0, 4.0, 400)};
  const auto s = distributed_summary(ranks);
  EXPECT_EQ(s["ranks"], 3);
  EXPECT_DOUBLE_EQ(s["compute_s"]["min"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["compute_s"]["max"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["compute_s"]["mean"].get<double>(), 3.0);
  // (max - min) / mean
  EXPECT_DOUBLE_EQ(s["compute_s"]["imbalance"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s["communication_s"]["imbalance"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(s["bytes_per_step"]["mean"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(s["data_time_s"]["imbalance"].get<double>(), 0.0);
}

TEST(DistributedSummary, NeedsEveryRanksMetrics) {
  EXPECT_THROW(distributed_summary(nlohmann::json::array()), InvalidArgument);
  EXPECT_THROW(distributed_summary(nullptr), InvalidArgument);
}

}  // namespace
}  // namespace d5
