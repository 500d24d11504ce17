// The example ring allreduce (examples/ring_allreduce) on 2 and 3 ranks: MPI's results for every
// reduction, and exactly the messages a ring sends.
#include <gtest/gtest.h>

#include "deep500/dist/mpi_world.h"
#include "ring_allreduce.h"

namespace d5 {
namespace {

TEST(RingAllreduce, SumsLikeMpiForAnyCount) {
  auto world = mpi_world();
  RingAllreduceCommunicator ring(world);
  for (int64_t count : {1, 2, 5, 1000, 1001}) {
    // Integer values: float sums are exact, in any order.
    std::vector<float> a(static_cast<size_t>(count)), b;
    std::vector<double> c(static_cast<size_t>(count)), d;
    for (int64_t i = 0; i < count; ++i) a[i] = c[i] = static_cast<float>((i * 7 + world->rank() * 13) % 101);
    b = a;
    d = c;
    ring.allreduce(std::span<float>(a), ReduceOp::sum);
    world->allreduce(std::span<float>(b), ReduceOp::sum);
    ring.allreduce(std::span<double>(c), ReduceOp::mean);
    world->allreduce(std::span<double>(d), ReduceOp::mean);
    EXPECT_EQ(a, b) << "count " << count;
    EXPECT_EQ(c, d) << "count " << count;
  }
  // max and min: values that differ by rank, so the wrong one (or a sum) cannot pass.
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
    std::vector<float> e(1001), f;
    for (size_t i = 0; i < e.size(); ++i) e[i] = static_cast<float>((static_cast<int>(i) * 5 + world->rank() * 37) % 29) - 14;
    f = e;
    ring.allreduce(std::span<float>(e), op);
    world->allreduce(std::span<float>(f), op);
    EXPECT_EQ(e, f) << (op == ReduceOp::max ? "max" : "min");
  }
  std::vector<int64_t> ints(3);
  EXPECT_THROW(ring.allreduce(std::span<int64_t>(ints), ReduceOp::sum), InvalidArgument);
}

TEST(RingAllreduce, SendsTwoNMinusOneChunksToTheRight) {
  auto world = mpi_world();
  RingAllreduceCommunicator ring(world);
  const int n = world->size(), r = world->rank();
  const int64_t count = 10;
  std::vector<float> a(count, 1.f);
  world->barrier();
  world->volume().reset();
  ring.allreduce(std::span<float>(a), ReduceOp::sum);
  for (float x : a) EXPECT_EQ(x, static_cast<float>(n));
  // Chunk i holds count / n elements, the first count % n one more. Reduce-scatter sends every
  // chunk but r + 1, allgather every chunk but r + 2.
  auto len = [&](int i) {
    i = ((i % n) + n) % n;
    return count / n + (i < count % n ? 1 : 0);
  };
  const int64_t elements = (count - len(r + 1)) + (count - len(r + 2));
  const auto& peers = world->volume().peers();
  const int right = (r + 1) % n;
  EXPECT_EQ(peers[right].bytes_sent, elements * 4);
  EXPECT_EQ(peers[right].messages_sent, 2 * (n - 1));
  EXPECT_EQ(world->volume().bytes_sent(), elements * 4) << "the ring sends only to the right";
  EXPECT_EQ(ring.volume().collective_bytes("allreduce"), count * 4);
}

}  // namespace
}  // namespace d5
