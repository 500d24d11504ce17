// Samplers: coverage, determinism, per-epoch reshuffling, buckets, weighted choice, events and
// exact restore.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "deep500/train/samplers.h"
#include "table_dataset.h"

namespace d5 {
namespace {

using testing::TableDataset;
using Batches = std::vector<std::vector<int64_t>>;

Batches drain_epoch(Sampler& s) {
  Batches out;
  for (auto b = s.next(); !b.empty(); b = s.next()) out.push_back(std::move(b));
  return out;
}

std::vector<int64_t> flatten(const Batches& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<int64_t> iota_vec(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(OrderedSampler, BatchesInOrderWithAndWithoutDropLast) {
  OrderedSampler keep(10, 4, false);
  EXPECT_EQ(drain_epoch(keep), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_TRUE(keep.next().empty());  // stays at the end until reset
  keep.reset();
  EXPECT_EQ(keep.epoch(), 1);
  EXPECT_EQ(drain_epoch(keep).size(), 3u);

  OrderedSampler drop(10, 4, true);
  EXPECT_EQ(drain_epoch(drop), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(drop.batches_per_epoch(), 2);
}

TEST(OrderedSampler, RefusesNonPositiveBatchAndNegativeSize) {
  EXPECT_THROW(OrderedSampler(10, 0), InvalidArgument);
  EXPECT_THROW(OrderedSampler(-1, 4), InvalidArgument);
  OrderedSampler empty(0, 4);
  EXPECT_TRUE(empty.next().empty());
}

TEST(ShuffleSampler, EachIndexExactlyOncePerEpochAndNewOrderEachEpoch) {
  ShuffleSampler s(103, 8, false, 42);
  std::set<std::vector<int64_t>> orders;
  for (int e = 0; e < 5; ++e) {
    std::vector<int64_t> order = flatten(drain_epoch(s));
    orders.insert(order);
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, iota_vec(103)) << "epoch " << e;
    s.reset();
  }
  EXPECT_EQ(orders.size(), 5u);
}

TEST(ShuffleSampler, DeterministicForASeedAndDifferentAcrossSeeds) {
  ShuffleSampler a(50, 7, false, 1), b(50, 7, false, 1), c(50, 7, false, 2);
  const Batches ea = drain_epoch(a);
  EXPECT_EQ(ea, drain_epoch(b));
  EXPECT_NE(ea, drain_epoch(c));
  EXPECT_EQ(flatten(ea), ShuffleSampler::permutation(50, 1, 0));
}

TEST(ShuffleSampler, FirstPositionIsUniform) {
  // Over 6000 epochs each of 6 indices should come first ~1000 times; a binomial standard
  // deviation is sqrt(6000 * 1/6 * 5/6) = 28.9, so 5 sigma is 145. Seeded: the outcome is fixed.
  std::vector<int> first(6, 0);
  for (int64_t e = 0; e < 6000; ++e) ++first[static_cast<size_t>(ShuffleSampler::permutation(6, 7, e)[0])];
  for (int c : first) EXPECT_NEAR(c, 1000, 145);
}

TEST(ShuffleSampler, DropLastLeavesOutOnlyTheShortBatch) {
  ShuffleSampler s(10, 3, true, 5);
  const Batches batches = drain_epoch(s);
  ASSERT_EQ(batches.size(), 3u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 3u);
  const std::vector<int64_t> all = flatten(batches);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 9u);
}

TableDataset lengths_dataset() {
  // 40 samples with lengths 1..40 cycling over 4 classes.
  std::vector<int64_t> labels, lengths;
  for (int64_t i = 0; i < 40; ++i) {
    labels.push_back(i % 4);
    lengths.push_back((i * 17) % 40 + 1);
  }
  return TableDataset(labels, 4, lengths);
}

TEST(BucketSampler, EveryBatchComesFromOneBucketAndEverySampleOnce) {
  const TableDataset ds = lengths_dataset();
  BucketSampler s(ds, 4, false, 3, {10, 20, 30});
  ASSERT_EQ(s.buckets().size(), 4u);
  for (int e = 0; e < 3; ++e) {
    const Batches batches = drain_epoch(s);
    for (const auto& b : batches) {
      const auto bucket_of = [&](int64_t i) { return std::min<int64_t>(ds.sample_length(i) / 10, 3); };  // boundaries 10, 20, 30
      for (int64_t i : b) EXPECT_EQ(bucket_of(i), bucket_of(b[0])) << "epoch " << e;
    }
    std::vector<int64_t> all = flatten(batches);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, iota_vec(40));
    s.reset();
  }
}

TEST(BucketSampler, BatchOrderAndMembershipChangeBetweenEpochs) {
  const TableDataset ds = lengths_dataset();
  BucketSampler s(ds, 4, false, 3, {10, 20, 30});
  const Batches e0 = drain_epoch(s);
  s.reset();
  const Batches e1 = drain_epoch(s);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0.size(), e1.size());
}

TEST(BucketSampler, DropLastAppliesPerBucket) {
  const TableDataset ds = lengths_dataset();
  // Buckets of 10 samples each: with batch 4, each keeps 2 full batches and drops 2 samples.
  BucketSampler s(ds, 4, true, 3, {11, 21, 31});
  const Batches batches = drain_epoch(s);
  EXPECT_EQ(batches.size(), 8u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 4u);
}

TEST(BucketSampler, AutomaticBoundariesSplitByQuantiles) {
  const TableDataset ds = lengths_dataset();
  BucketSampler s(ds, 5, false, 3, {}, 4);
  EXPECT_EQ(s.boundaries(), (std::vector<int64_t>{11, 21, 31}));
  for (const auto& b : s.buckets()) EXPECT_EQ(b.size(), 10u);
}

TEST(BucketSampler, RefusesFixedSizeDataAndBadBoundaries) {
  const TableDataset fixed = TableDataset::cyclic(10, 2);
  EXPECT_THROW(BucketSampler(fixed, 2), InvalidArgument);
  const TableDataset ds = lengths_dataset();
  EXPECT_THROW(BucketSampler(ds, 2, false, 0, {10, 10}), InvalidArgument);
  EXPECT_THROW(BucketSampler(ds, 2, false, 0, {0, 10}), InvalidArgument);
}

TEST(ChoiceSampler, WithReplacementFollowsTheWeights) {
  // Weights 1:2:3:4 (and a zero) over 20000 draws: expected counts 2000, 4000, 6000, 8000; the
  // largest binomial sd is sqrt(20000 * 0.4 * 0.6) = 69, so 5 sigma is 350.
  ChoiceOptions o;
  o.weights = {1, 2, 0, 3, 4};
  o.samples_per_epoch = 20000;
  ChoiceSampler s(5, 100, false, 11, o);
  std::vector<int> counts(5, 0);
  for (int64_t i : flatten(drain_epoch(s))) ++counts[static_cast<size_t>(i)];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0], 2000, 350);
  EXPECT_NEAR(counts[1], 4000, 350);
  EXPECT_NEAR(counts[3], 6000, 350);
  EXPECT_NEAR(counts[4], 8000, 350);
  EXPECT_DOUBLE_EQ(s.probabilities()[4], 0.4);
}

TEST(ChoiceSampler, UniformWithReplacementDrawsDuplicates) {
  ChoiceSampler s(100, 10, false, 4, ChoiceOptions{});
  const std::vector<int64_t> all = flatten(drain_epoch(s));
  EXPECT_EQ(all.size(), 100u);
  // A bootstrap of 100 from 100 has ~63 distinct values; with duplicates impossible to avoid
  // (probability 100!/100^100), fewer than 100 distinct values is certain.
  EXPECT_LT(std::set<int64_t>(all.begin(), all.end()).size(), 90u);
}

TEST(ChoiceSampler, WithoutReplacementNeverRepeatsAndHonoursZeroWeights) {
  ChoiceOptions uniform;
  uniform.replacement = false;
  uniform.samples_per_epoch = 30;
  ChoiceSampler u(50, 7, false, 9, uniform);
  const auto picks = flatten(drain_epoch(u));
  EXPECT_EQ(picks.size(), 30u);
  EXPECT_EQ(std::set<int64_t>(picks.begin(), picks.end()).size(), 30u);

  ChoiceOptions weighted;
  weighted.replacement = false;
  weighted.samples_per_epoch = 4;
  weighted.weights = {0, 1, 1, 0, 5, 1};
  ChoiceSampler w(6, 2, false, 9, weighted);
  for (int e = 0; e < 20; ++e) {
    const auto all = flatten(drain_epoch(w));
    EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()), (std::set<int64_t>{1, 2, 4, 5})) << "epoch " << e;
    w.reset();
  }
}

TEST(ChoiceSampler, WeightedWithoutReplacementFavoursHeavySamplesFirst) {
  // The heavy sample (weight 20 of 29) is drawn first with probability 20/29 = 0.69 per epoch.
  ChoiceOptions o;
  o.replacement = false;
  o.samples_per_epoch = 2;
  o.weights = {1, 1, 20, 1, 1, 1, 1, 1, 1, 1};
  ChoiceSampler s(10, 1, false, 2, o);
  int first_heavy = 0;
  const int epochs = 2000;
  for (int e = 0; e < epochs; ++e) {
    if (s.next()[0] == 2) ++first_heavy;
    s.reset();
  }
  // Binomial sd sqrt(2000 * 0.69 * 0.31) = 20.7; 5 sigma is 103.
  EXPECT_NEAR(first_heavy, 2000.0 * 20 / 29, 103);
}

TEST(ChoiceSampler, RefusesImpossibleRequests) {
  ChoiceOptions too_many;
  too_many.replacement = false;
  too_many.samples_per_epoch = 11;
  EXPECT_THROW(ChoiceSampler(10, 2, false, 0, too_many), InvalidArgument);
  ChoiceOptions bad_weights;
  bad_weights.weights = {1, -1};
  EXPECT_THROW(ChoiceSampler(2, 1, false, 0, bad_weights), InvalidArgument);
  bad_weights.weights = {0, 0};
  EXPECT_THROW(ChoiceSampler(2, 1, false, 0, bad_weights), InvalidArgument);
  bad_weights.weights = {1, 1, 1};
  EXPECT_THROW(ChoiceSampler(2, 1, false, 0, bad_weights), InvalidArgument);
}

TEST(ChoiceSampler, ClassBalancedWeightsEqualiseClasses) {
  // 30 samples of class 0, 10 of class 1.
  std::vector<int64_t> labels(40, 0);
  std::fill(labels.begin() + 30, labels.end(), 1);
  const TableDataset ds(labels, 2);
  const auto w = ChoiceSampler::class_balanced_weights(ds);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 30);
  EXPECT_DOUBLE_EQ(w[39], 1.0 / 10);
  auto s = make_sampler("balanced", ds, 40, false, 1);
  int ones = 0, total = 0;
  for (int e = 0; e < 50; ++e) {
    for (int64_t i : flatten(drain_epoch(*s))) {
      ones += labels[static_cast<size_t>(i)];
      ++total;
    }
    s->reset();
  }
  // 2000 draws, p = 1/2: sd 22.4, 5 sigma 112.
  EXPECT_NEAR(ones, total / 2, 112);
}

class CountingEvents : public SamplerEvent {
 public:
  void on_reset(const Sampler&, int64_t epoch) override { resets.push_back(epoch); }
  void before_sampling(const Sampler&) override { ++before; }
  void after_sampling(const Sampler&, const std::vector<int64_t>& batch) override { sizes.push_back(batch.size()); }
  std::vector<int64_t> resets;
  int before = 0;
  std::vector<size_t> sizes;
};

TEST(SamplerEvents, FireOnResetAndAroundEveryDraw) {
  OrderedSampler s(5, 2);
  auto ev = std::make_shared<CountingEvents>();
  s.add_event(ev);
  drain_epoch(s);  // 3 batches and the empty end marker
  s.reset();
  s.next();
  EXPECT_EQ(ev->before, 5);
  EXPECT_EQ(ev->sizes, (std::vector<size_t>{2, 2, 1, 2}));
  EXPECT_EQ(ev->resets, (std::vector<int64_t>{1}));
}

class RestoreTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RestoreTest, RestoredSamplerContinuesExactlyLikeAnUninterruptedOne) {
  const TableDataset ds = lengths_dataset();
  auto reference = make_sampler(GetParam(), ds, 3, false, 77);
  std::vector<std::pair<SamplerState, std::vector<int64_t>>> run;  // state before each batch
  for (int e = 0; e < 4; ++e) {
    for (;;) {
      const SamplerState st = reference->state();
      auto b = reference->next();
      if (b.empty()) break;
      run.emplace_back(st, std::move(b));
    }
    reference->reset();
  }
  for (size_t cut : {size_t{0}, size_t{5}, run.size() / 2, run.size() - 1}) {
    auto resumed = make_sampler(GetParam(), ds, 3, false, 77);
    resumed->restore(run[cut].first);
    for (size_t i = cut; i < run.size(); ++i) {
      auto b = resumed->next();
      if (b.empty()) {
        resumed->reset();
        b = resumed->next();
      }
      ASSERT_EQ(b, run[i].second) << GetParam() << ": cut " << cut << ", batch " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSamplers, RestoreTest, ::testing::Values("ordered", "shuffle", "bucket", "choice", "balanced"));

TEST(SamplerRestore, RefusesAPositionBeyondTheEpoch) {
  ShuffleSampler s(10, 3, false, 1);
  EXPECT_THROW(s.restore(SamplerState{2, 5}), InvalidArgument);
  EXPECT_THROW(s.restore(SamplerState{-1, 0}), InvalidArgument);
  EXPECT_EQ(s.state().epoch, 0);
  s.restore(SamplerState{2, 4});  // the end of epoch 2 is a valid position
  EXPECT_TRUE(s.next().empty());
}

TEST(MakeSampler, UnknownNameListsTheKnownOnes) {
  const TableDataset ds = TableDataset::cyclic(10, 2);
  try {
    make_sampler("random", ds, 2, false, 0);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ordered, shuffle, bucket, choice, balanced"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sampler_names().size(), 5u);
  EXPECT_EQ(make_sampler("shuffle", ds, 2, true, 0)->name(), "shuffle");
}

}  // namespace
}  // namespace d5
