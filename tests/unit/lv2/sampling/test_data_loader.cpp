// DataLoader: prefetch equivalence, consumer-side state and restore, exceptions at the right
// batch, transforms, timings and shutdown.
#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cstring>
#include <thread>

#include "deep500/train/data_loader.h"
#include "deep500/train/samplers.h"
#include "table_dataset.h"
#include "../../test_memory_device.h"

namespace d5 {
namespace {

using namespace std::chrono_literals;
using testing::TableDataset;

// What a consumer saw: per batch the indices, the raw bytes of every tensor, and the epoch.
struct Seen {
  std::vector<int64_t> indices;
  std::map<std::string, std::vector<uint8_t>> bytes;
  int64_t epoch;
  bool operator==(const Seen&) const = default;
};

Seen record(const DataLoader& loader, const Batch& batch) {
  Seen s{loader.last_indices(), {}, loader.epoch()};
  for (const auto& [name, t] : batch) {
    const auto* p = static_cast<const uint8_t*>(t.data());
    s.bytes[name] = std::vector<uint8_t>(p, p + t.bytes());
  }
  return s;
}

std::vector<Seen> run_epochs(DataLoader& loader, int epochs) {
  std::vector<Seen> out;
  for (int e = 0; e < epochs; ++e) {
    while (auto b = loader.next()) out.push_back(record(loader, *b));
    loader.start_next_epoch();
  }
  return out;
}

// Marks each batch with its epoch and the sum of its indices, the way an augmentation would use them.
class TagTransform : public BatchTransform {
 public:
  std::string describe() const override { return "tag"; }
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override {
    int64_t sum = 0;
    for (int64_t i : indices) sum += i;
    batch["tag"] = Tensor::from_values<int64_t>(Shape{2}, {epoch, sum});
  }
};

std::unique_ptr<DataLoader> make_loader(const Dataset& ds, const std::string& sampler, int64_t prefetch, int workers,
                                        uint64_t seed = 5) {
  return std::make_unique<DataLoader>(ds, make_sampler(sampler, ds, 4, false, seed), DataLoaderOptions{prefetch, workers},
                                      std::vector<std::shared_ptr<const BatchTransform>>{std::make_shared<TagTransform>()});
}

TEST(DataLoader, PrefetchingHandsOutTheSameBatchesAsSynchronousLoading) {
  TableDataset ds = TableDataset::cyclic(37, 3);
  ds.set_delay(100us);
  for (const char* sampler : {"shuffle", "choice"}) {
    auto sync = make_loader(ds, sampler, 0, 1);
    const std::vector<Seen> expected = run_epochs(*sync, 3);
    ASSERT_EQ(expected.size(), 30u);
    EXPECT_EQ(expected.front().bytes.count("tag"), 1u);
    for (auto [k, w] : {std::pair{1, 1}, std::pair{4, 1}, std::pair{4, 3}, std::pair{16, 4}}) {
      auto prefetching = make_loader(ds, sampler, k, w);
      EXPECT_EQ(run_epochs(*prefetching, 3), expected) << sampler << ", prefetch " << k << ", workers " << w;
    }
  }
}

TEST(DataLoader, NextReturnsNulloptAtTheEpochEndUntilTheNextEpochStarts) {
  const TableDataset ds = TableDataset::cyclic(10, 2);
  for (int64_t k : {0, 3}) {
    auto loader = make_loader(ds, "ordered", k, 1);
    EXPECT_EQ(loader->batches_per_epoch(), 3);
    int batches = 0;
    while (loader->next()) ++batches;
    EXPECT_EQ(batches, 3);
    EXPECT_FALSE(loader->next().has_value());
    EXPECT_EQ(loader->state().batch, 3);
    loader->start_next_epoch();
    EXPECT_EQ(loader->epoch(), 1);
    auto first = loader->next();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(first->at("tag").at<int64_t>({0}), 1);  // transforms see the epoch
  }
}

TEST(DataLoader, StartingTheNextEpochEarlyDropsTheRestOfThisOne) {
  const TableDataset ds = TableDataset::cyclic(40, 2);
  auto loader = make_loader(ds, "ordered", 4, 2);
  ASSERT_TRUE(loader->next());
  std::this_thread::sleep_for(5ms);  // let the workers run ahead
  loader->start_next_epoch();
  ASSERT_TRUE(loader->next());
  EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(loader->state().epoch, 1);
  EXPECT_EQ(loader->state().batch, 1);
}

TEST(DataLoader, StateIsTheConsumersPositionNotThePrefetchers) {
  const TableDataset ds = TableDataset::cyclic(50, 5);
  auto reference = make_loader(ds, "shuffle", 0, 1);
  const std::vector<Seen> uninterrupted = run_epochs(*reference, 3);  // 13 batches per epoch

  for (int64_t consumed : {0, 5, 12, 13, 20, 38}) {
    auto first = make_loader(ds, "shuffle", 8, 2);
    std::vector<Seen> seen;
    while (static_cast<int64_t>(seen.size()) < consumed) {
      auto b = first->next();
      if (!b) {
        first->start_next_epoch();
        continue;
      }
      seen.push_back(record(*first, *b));
    }
    std::this_thread::sleep_for(2ms);  // the prefetcher is now up to 8 batches ahead
    const SamplerState saved = first->state();
    EXPECT_EQ(saved.epoch * 13 + saved.batch, consumed);
    first.reset();

    auto resumed = make_loader(ds, "shuffle", 8, 2);
    resumed->restore(saved);
    while (static_cast<int64_t>(seen.size()) < 39) {
      auto b = resumed->next();
      if (!b) {
        resumed->start_next_epoch();
        continue;
      }
      seen.push_back(record(*resumed, *b));
    }
    EXPECT_EQ(seen, uninterrupted) << "resumed after " << consumed << " batches";
  }
}

TEST(DataLoader, RestoreMidRunDiscardsPrefetchedBatches) {
  const TableDataset ds = TableDataset::cyclic(40, 4);
  auto loader = make_loader(ds, "ordered", 6, 3);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(loader->next());
  loader->restore(SamplerState{0, 1});
  ASSERT_TRUE(loader->next());
  EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_THROW(loader->restore(SamplerState{0, 99}), InvalidArgument);
  ASSERT_TRUE(loader->next());  // a refused restore leaves the loader where it was
  EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{8, 9, 10, 11}));
}

TEST(DataLoader, AFetchExceptionReachesTheConsumerAtItsBatch) {
  TableDataset ds = TableDataset::cyclic(30, 3);
  ds.set_failing_index(13);  // in batch 3 (indices 12..15) of the ordered sampler
  for (auto [k, w] : {std::pair{0, 1}, std::pair{1, 1}, std::pair{4, 2}, std::pair{8, 4}}) {
    auto loader = make_loader(ds, "ordered", k, w);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(loader->next().has_value()) << "prefetch " << k << ", batch " << i;
    }
    try {
      loader->next();
      ADD_FAILURE() << "prefetch " << k << ": batch 3 did not throw";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("sample 13"), std::string::npos) << e.what();
    }
    EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{12, 13, 14, 15}));
    EXPECT_EQ(loader->state().batch, 4);
    ASSERT_TRUE(loader->next().has_value());  // the loader moves on
    EXPECT_EQ(loader->last_indices(), (std::vector<int64_t>{16, 17, 18, 19}));
  }
}

TEST(DataLoader, RecordsProduceAndWaitTimePerBatch) {
  TableDataset ds = TableDataset::cyclic(24, 2);
  ds.set_delay(20ms);
  // The consumer spends 40 ms per batch and the loader prefetches 2: after the first batch each
  // one is ready before it is asked for, so the consumer barely waits, while producing still
  // takes the 20 ms sleep.
  auto loader = make_loader(ds, "ordered", 2, 1);
  int batches = 0;
  while (loader->next()) {
    ++batches;
    std::this_thread::sleep_for(40ms);
  }
  ASSERT_EQ(loader->timings().size(), 6u);
  std::vector<double> later_waits;
  for (size_t i = 0; i < loader->timings().size(); ++i) {
    const BatchTiming& t = loader->timings()[i];
    EXPECT_GE(t.fetch_s, 0.020);
    EXPECT_DOUBLE_EQ(t.produce_s, t.fetch_s + t.transform_s);
    if (i > 0) later_waits.push_back(t.wait_s);
  }
  EXPECT_GE(loader->timings()[0].wait_s, 0.020);  // nothing was ready for the first one
  // 5 batches of 20 ms production hidden behind 40 ms of consumer work: the median wait is far
  // below the 20 ms each would take without overlap. A median, so that a preemption or two on a
  // loaded machine cannot decide it.
  std::sort(later_waits.begin(), later_waits.end());
  EXPECT_LT(later_waits[later_waits.size() / 2], 0.010);

  auto sync = make_loader(ds, "ordered", 0, 1);
  ASSERT_TRUE(sync->next());
  EXPECT_GE(sync->timings()[0].wait_s, sync->timings()[0].produce_s);
}

TEST(DataLoader, DestroyingWithBatchesInFlightJoinsTheWorkers) {
  TableDataset ds = TableDataset::cyclic(400, 2);
  ds.set_delay(2ms);
  for (int i = 0; i < 5; ++i) {
    auto loader = make_loader(ds, "shuffle", 16, 4);
    ASSERT_TRUE(loader->next());
  }
}

// Device batches: the named tensor comes out on the device with the bytes the host loader gives,
// copied through the device's staging memory (one staged copy per batch), or by a plain copy on a
// device without staging memory; the other tensors stay on the host. With and without prefetch.
TEST(DataLoader, DeviceBatchesCarryTheHostLoadersValues) {
  const auto alloc = test::test_memory_allocator("testmem-loader");
  const Device device = test::test_memory_device(0, "testmem-loader");
  TableDataset ds = TableDataset::cyclic(37, 3);
  auto host = make_loader(ds, "shuffle", 0, 1);
  const std::vector<Seen> expected = run_epochs(*host, 2);
  for (const bool staging : {true, false}) {
    alloc->staging = staging;
    for (const auto& [prefetch, workers] : {std::pair{0, 1}, std::pair{4, 2}}) {
      const int staged = alloc->staged_copies, plain = alloc->copies_from_host;
      DataLoader loader(ds, make_sampler("shuffle", ds, 4, false, 5),
                        DataLoaderOptions{prefetch, workers, {{kDataInput, device}}},
                        {std::make_shared<TagTransform>()});
      std::vector<Seen> seen;
      for (int e = 0; e < 2; ++e) {
        while (auto b = loader.next()) {
          ASSERT_EQ(b->at(kDataInput).device(), device);
          ASSERT_TRUE(b->at(kDataLabels).on_host());
          ASSERT_TRUE(b->at("tag").on_host());
          (*b)[kDataInput] = b->at(kDataInput).to(Device::cpu());
          seen.push_back(record(loader, *b));
        }
        if (e == 0) loader.start_next_epoch();  // not after the last: it would prefetch a third epoch
      }
      EXPECT_EQ(seen, expected) << "staging " << staging << ", prefetch " << prefetch;
      const auto batches = static_cast<int>(expected.size());
      EXPECT_EQ(alloc->staged_copies - staged, staging ? batches : 0);
      EXPECT_EQ(alloc->copies_from_host - plain, staging ? 0 : batches);
      for (const BatchTiming& t : loader.timings()) {
        EXPECT_GE(t.copy_s, 0);
        EXPECT_DOUBLE_EQ(t.produce_s, t.fetch_s + t.transform_s + t.copy_s);
      }
    }
  }
  alloc->staging = false;
}

TEST(DataLoader, RefusesMismatchedSamplerAndBadOptions) {
  const TableDataset ds = TableDataset::cyclic(10, 2);
  EXPECT_THROW(DataLoader(ds, std::make_unique<OrderedSampler>(11, 2)), InvalidArgument);
  EXPECT_THROW(DataLoader(ds, std::make_unique<OrderedSampler>(10, 2), DataLoaderOptions{-1, 1}), InvalidArgument);
  EXPECT_THROW(DataLoader(ds, std::make_unique<OrderedSampler>(10, 2), DataLoaderOptions{2, 0}), InvalidArgument);
  EXPECT_THROW(DataLoader(ds, nullptr), InvalidArgument);
}

}  // namespace
}  // namespace d5
