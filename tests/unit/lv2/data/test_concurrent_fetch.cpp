// Dataset::fetch is const and must be safe from several threads at once (loaders decode in
// parallel): batches fetched concurrently equal the same batches fetched one after the other.
#include <gtest/gtest.h>

#include <thread>

#include "data_test_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"

namespace d5::test {

namespace {

void expect_concurrent_fetch_matches_serial(const Dataset& ds) {
  constexpr int kThreads = 4, kBatches = 24;
  const int64_t batch = 16;
  auto indices = [&](int k) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < batch; ++i) idx.push_back((k * 7919 + i * 104729) % ds.size());
    return idx;
  };
  std::vector<Batch> serial, parallel(kBatches);
  for (int k = 0; k < kBatches; ++k) serial.push_back(ds.fetch(indices(k)));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int k = t; k < kBatches; k += kThreads) parallel[static_cast<size_t>(k)] = ds.fetch(indices(k));
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < kBatches; ++k) {
    EXPECT_TRUE(allclose(parallel[static_cast<size_t>(k)].at(kDataInput), serial[static_cast<size_t>(k)].at(kDataInput), 0, 0))
        << ds.name() << " batch " << k;
    EXPECT_TRUE(allclose(parallel[static_cast<size_t>(k)].at(kDataLabels), serial[static_cast<size_t>(k)].at(kDataLabels), 0, 0))
        << ds.name() << " batch " << k;
  }
}

}  // namespace

TEST(ConcurrentFetch, SyntheticAndNpyMatchSerialFetches) {
  register_builtin_datasets();
  expect_concurrent_fetch_matches_serial(
      *open_dataset(DatasetSpec{"synthetic-learnable", "", "train", 5, {{"samples", "1000"}, {"shape", "3x8x8"}}}));
  TempDir dir;
  Tensor x(DType::u8, Shape{500, 2, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(i % 251));
  Tensor y(DType::i64, Shape{500});
  for (int64_t i = 0; i < 500; ++i) y.set(i, static_cast<double>(i % 3));
  write_npy_file(dir.file("inputs.npy"), x);
  write_npy_file(dir.file("labels.npy"), y);
  expect_concurrent_fetch_matches_serial(*open_dataset(DatasetSpec{"npy", dir.path.string(), "train", 0, {{"range", "100:400"}}}));
}

TEST(ConcurrentFetch, MnistMatchesSerialFetches) {
  if (!have_mnist()) GTEST_SKIP() << "no MNIST test split at " << kMnistDir;
  register_builtin_datasets();
  expect_concurrent_fetch_matches_serial(*open_dataset(DatasetSpec{"mnist", kMnistDir, "test", 0, {}}));
}

}  // namespace d5::test
