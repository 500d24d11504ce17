// Distributed samplers: disjoint shards that together are the one-process batch of N x b.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "deep500/dist/distributed_sampler.h"
#include "deep500/core/error.h"
#include "deep500/train/samplers.h"

namespace d5 {
namespace {

std::unique_ptr<DistributedSampler> partitioned(const std::string& kind, int64_t n, int64_t b, int rank, int ranks,
                                                uint64_t seed) {
  auto make = [kind, n, seed](int64_t global) -> std::unique_ptr<Sampler> {
    if (kind == "ordered") return std::make_unique<OrderedSampler>(n, global, true, seed);
    return std::make_unique<ShuffleSampler>(n, global, true, seed);
  };
  return std::make_unique<DistributedSampler>(make, n, b, seed, rank, ranks, Distribution::partitioned);
}

// Global step t on N ranks covers exactly the samples one process draws at step t with batch N b,
// rank r taking the r-th slice, for every epoch.
TEST(DistributedSampler, PartitionedStepsConcatenateToTheOneProcessBatch) {
  for (const std::string kind : {"ordered", "shuffle"}) {
    for (int ranks : {1, 2, 3, 4}) {
      const int64_t n = 50, b = 4;
      std::vector<std::unique_ptr<DistributedSampler>> per_rank;
      for (int r = 0; r < ranks; ++r) per_rank.push_back(partitioned(kind, n, b, r, ranks, 7));
      std::unique_ptr<Sampler> single = kind == "ordered"
                                            ? std::unique_ptr<Sampler>(std::make_unique<OrderedSampler>(n, ranks * b, true, 7))
                                            : std::make_unique<ShuffleSampler>(n, ranks * b, true, 7);
      for (int epoch = 0; epoch < 3; ++epoch) {
        int64_t steps = 0;
        for (auto expected = single->next(); !expected.empty(); expected = single->next(), ++steps) {
          std::vector<int64_t> joined;
          for (auto& s : per_rank) {
            const auto part = s->next();
            ASSERT_EQ(static_cast<int64_t>(part.size()), b);
            joined.insert(joined.end(), part.begin(), part.end());
          }
          EXPECT_EQ(joined, expected) << kind << " ranks " << ranks << " epoch " << epoch << " step " << steps;
        }
        EXPECT_EQ(steps, n / (ranks * b));
        for (auto& s : per_rank) {
          EXPECT_TRUE(s->next().empty()) << "every rank ends the epoch at the same step";
          s->reset();
        }
        single->reset();
      }
    }
  }
}

TEST(DistributedSampler, ShardsAreDisjointAndReshuffledEveryEpoch) {
  const int ranks = 3;
  std::vector<std::unique_ptr<DistributedSampler>> s;
  for (int r = 0; r < ranks; ++r) s.push_back(partitioned("shuffle", 60, 5, r, ranks, 11));
  std::vector<std::vector<int64_t>> first_epoch(ranks);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> seen;
    for (int r = 0; r < ranks; ++r) {
      std::vector<int64_t> shard;
      for (auto b = s[r]->next(); !b.empty(); b = s[r]->next()) shard.insert(shard.end(), b.begin(), b.end());
      for (int64_t i : shard) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " drawn twice in epoch " << epoch;
      if (epoch == 0) first_epoch[r] = shard;
      else EXPECT_NE(shard, first_epoch[r]) << "rank " << r << " got the same shard in epoch 1";
      s[r]->reset();
    }
    EXPECT_EQ(seen.size(), 60u);
  }
}

TEST(DistributedSampler, ReplicatedRanksDrawTheSameBatches) {
  auto make = [](int64_t global) { return std::make_unique<ShuffleSampler>(30, global, true, 3); };
  DistributedSampler a(make, 30, 6, 3, 0, 2, Distribution::replicated), b(make, 30, 6, 3, 1, 2, Distribution::replicated);
  ShuffleSampler single(30, 6, true, 3);
  EXPECT_EQ(a.name(), "replicated-shuffle");
  for (auto x = single.next(); !x.empty(); x = single.next()) {
    EXPECT_EQ(a.next(), x);
    EXPECT_EQ(b.next(), x);
  }
}

TEST(DistributedSampler, RestoreContinuesMidEpoch) {
  auto a = partitioned("shuffle", 40, 3, 1, 2, 5);
  a->next();
  a->reset();
  a->next();
  const auto expected = a->next();
  auto b = partitioned("shuffle", 40, 3, 1, 2, 5);
  b->restore(SamplerState{1, 1});
  EXPECT_EQ(b->next(), expected);
  EXPECT_EQ(b->name(), "partitioned-shuffle");
}

TEST(DistributedSampler, RefusesABadRank) {
  EXPECT_THROW(partitioned("ordered", 10, 2, 2, 2, 0), InvalidArgument);
}

}  // namespace
}  // namespace d5
