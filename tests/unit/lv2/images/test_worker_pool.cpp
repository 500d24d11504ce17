#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "deep500/core/error.h"
#include "lv2/images/image_common.h"

namespace d5::images {
namespace {

TEST(WorkerPool, EveryIndexRunsExactlyOnce) {
  WorkerPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (int64_t n : {0, 1, 3, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(WorkerPool, UsesSeveralThreads) {
  WorkerPool pool(3);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Each call waits (up to 10 s, so a pool that runs them one by one fails instead of hanging)
  // until all three are in flight at once: only possible when three threads run them.
  pool.parallel_for(3, [&](int64_t) {
    {
      std::lock_guard lock(m);
      ids.insert(std::this_thread::get_id());
    }
    arrived++;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  EXPECT_EQ(ids.size(), 3u);
}

TEST(WorkerPool, FirstExceptionPropagatesAndPoolStaysUsable) {
  WorkerPool pool(4);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(100,
                                 [&](int64_t i) {
                                   ran++;
                                   if (i == 10) throw FormatError("bad sample 10");
                                 }),
               FormatError);
  EXPECT_LE(ran.load(), 100);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(WorkerPool, ConcurrentCallersTakeTurns) {
  WorkerPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) pool.parallel_for(50, [&](int64_t i) { total += i; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 20 * 1225);
}

TEST(WorkerPool, RejectsZeroThreads) { EXPECT_THROW(WorkerPool(0), InvalidArgument); }

}  // namespace
}  // namespace d5::images
