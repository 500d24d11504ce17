// The MPI communicator on 2 and 3 ranks: results of every operation and the exact bytes and
// messages it counts per peer and per collective.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <set>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/dist/mpi_world.h"

namespace d5 {
namespace {

class MpiCommunicatorTest : public testing::Test {
 protected:
  void SetUp() override {
    comm = mpi_world();
    comm->barrier();
    comm->volume().reset();
    rank = comm->rank();
    n = comm->size();
  }
  std::shared_ptr<Communicator> comm;
  int rank = 0, n = 1;
};

TEST_F(MpiCommunicatorTest, WorldHasSeveralRanks) {
  EXPECT_GE(n, 2);
  EXPECT_EQ(comm->name(), "mpi");
  EXPECT_TRUE(launched_by_mpi_launcher());
}

// The watchdog (started by mpi_world() with the tests' 4 s timeout) listens for heartbeats from a
// thread, so a rank that computes for longer than the timeout while the others wait for it in a
// collective is not taken for lost: this test would end the run with exit 4 if it were.
TEST_F(MpiCommunicatorTest, ARankBusyForLongerThanTheWatchdogTimeoutIsNotTakenForLost) {
  ASSERT_EQ(mpi_watchdog_timeout(), 4.0);
  const auto start = std::chrono::steady_clock::now();
  if (rank == 0) {
    volatile double sink = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(6)) sink = sink + 1e-9;
  }
  comm->barrier();
  // Rank 0 computed for 6 s; the others entered the test (and read their clocks) a little later.
  if (rank == 0) {
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
  }
}

TEST_F(MpiCommunicatorTest, AllreduceSumMeanMaxAndTheirBytes) {
  std::vector<float> a(5), b(5);
  std::vector<int64_t> c(3);
  for (int i = 0; i < 5; ++i) a[i] = b[i] = static_cast<float>(rank + i);
  for (int i = 0; i < 3; ++i) c[i] = rank * 10 + i;
  comm->allreduce(std::span<float>(a), ReduceOp::sum);
  comm->allreduce(std::span<float>(b), ReduceOp::mean);
  comm->allreduce(std::span<int64_t>(c), ReduceOp::max);
  const float rank_sum = static_cast<float>(n * (n - 1) / 2);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(a[i], rank_sum + static_cast<float>(n * i));
    EXPECT_FLOAT_EQ(b[i], (rank_sum + static_cast<float>(n * i)) / static_cast<float>(n));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c[i], (n - 1) * 10 + i);
  const auto& all = comm->volume().collectives().at("allreduce");
  EXPECT_EQ(all.calls, 3);
  EXPECT_EQ(all.bytes, 5 * 4 + 5 * 4 + 3 * 8);
  EXPECT_GT(all.time_s, 0);
  EXPECT_GT(comm->volume().time_s(), 0);
  // Allreduce's per-peer pattern is MPI's own; only its payload is counted.
  EXPECT_EQ(comm->volume().bytes_sent(), 0);
}

TEST_F(MpiCommunicatorTest, MeanOfIntegersIsRefused) {
  std::vector<int64_t> c(2, 1);
  EXPECT_THROW(comm->allreduce(std::span<int64_t>(c), ReduceOp::mean), InvalidArgument);
  comm->barrier();
}

TEST_F(MpiCommunicatorTest, BroadcastCountsTheRootToEveryPeer) {
  const int root = n - 1;
  std::vector<double> v(7, rank == root ? 2.5 : 0.0);
  comm->broadcast(std::span<double>(v), root);
  for (double x : v) EXPECT_EQ(x, 2.5);
  const auto& peers = comm->volume().peers();
  for (int p = 0; p < n; ++p) {
    if (rank == root) {
      EXPECT_EQ(peers[p].bytes_sent, p == root ? 0 : 56) << "peer " << p;
      EXPECT_EQ(peers[p].messages_sent, p == root ? 0 : 1);
    } else {
      EXPECT_EQ(peers[p].bytes_received, p == root ? 56 : 0) << "peer " << p;
      EXPECT_EQ(peers[p].bytes_sent, 0);
    }
  }
  EXPECT_EQ(comm->volume().collective_bytes("broadcast"), 56);
}

TEST_F(MpiCommunicatorTest, GatherGathervAndScatter) {
  std::vector<int32_t> mine = {rank, rank * 2};
  std::vector<int32_t> all(static_cast<size_t>(2 * n), -1);
  comm->gather(mine.data(), 2, DType::i32, all.data(), 0);
  if (rank == 0) {
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all[2 * r], r);
      EXPECT_EQ(all[2 * r + 1], 2 * r);
    }
  }
  // Rank r sends r + 1 elements.
  std::vector<int64_t> counts(static_cast<size_t>(n));
  std::iota(counts.begin(), counts.end(), int64_t{1});
  std::vector<uint8_t> vmine(static_cast<size_t>(rank + 1), static_cast<uint8_t>(rank));
  std::vector<uint8_t> vall(static_cast<size_t>(n * (n + 1) / 2), 255);
  comm->gatherv(vmine.data(), rank + 1, DType::u8, vall.data(), counts, 0);
  if (rank == 0) {
    size_t at = 0;
    for (int r = 0; r < n; ++r)
      for (int k = 0; k <= r; ++k) EXPECT_EQ(vall[at++], r);
  }
  std::vector<double> src(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
  std::vector<double> part(3);
  comm->scatter(src.data(), 3, DType::f64, part.data(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(part[i], 3 * rank + i);

  const auto& peers = comm->volume().peers();
  if (rank == 0) {
    for (int p = 1; p < n; ++p) {
      EXPECT_EQ(peers[p].bytes_received, 2 * 4 + (p + 1)) << "peer " << p;
      EXPECT_EQ(peers[p].messages_received, 2);
      EXPECT_EQ(peers[p].bytes_sent, 3 * 8);
      EXPECT_EQ(peers[p].messages_sent, 1);
    }
    EXPECT_EQ(comm->volume().collective_bytes("gather"), 2 * 4 * n + n * (n + 1) / 2);
  } else {
    EXPECT_EQ(peers[0].bytes_sent, 2 * 4 + (rank + 1));
    EXPECT_EQ(peers[0].bytes_received, 3 * 8);
    EXPECT_EQ(comm->volume().bytes_sent(), 2 * 4 + (rank + 1));
  }
  EXPECT_EQ(comm->volume().collective_bytes("scatter"), 3 * 8 * n);
}

TEST_F(MpiCommunicatorTest, AllgatherVariableCounts) {
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) counts[r] = 2 * r + 1;
  std::vector<float> mine(static_cast<size_t>(2 * rank + 1), static_cast<float>(rank));
  std::vector<float> all(static_cast<size_t>(n * n));
  comm->allgatherv(mine.data(), 2 * rank + 1, DType::f32, all.data(), counts);
  size_t at = 0;
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < 2 * r + 1; ++k) EXPECT_EQ(all[at++], static_cast<float>(r));
  EXPECT_EQ(comm->volume().collective_bytes("allgather"), 4 * n * n);
  EXPECT_THROW(comm->allgatherv(mine.data(), 99, DType::f32, all.data(), counts), InvalidArgument);
}

TEST_F(MpiCommunicatorTest, SendRecvAroundTheRingCountsPerPeer) {
  const auto nb = comm->ring_neighbours();
  const int left = nb[0], right = nb[1];
  std::vector<int64_t> out = {rank, rank + 100, rank + 200}, in(3);
  comm->sendrecv(out.data(), 3, right, in.data(), 3, left, DType::i64);
  EXPECT_EQ(in[0], left);
  EXPECT_EQ(in[2], left + 200);
  // Blocking send and recv: even ranks send first.
  std::vector<float> x = {1.f * rank}, y(1);
  if (rank % 2 == 0) {
    comm->send(x.data(), 1, DType::f32, right);
    comm->recv(y.data(), 1, DType::f32, left);
  } else {
    comm->recv(y.data(), 1, DType::f32, left);
    comm->send(x.data(), 1, DType::f32, right);
  }
  EXPECT_EQ(y[0], static_cast<float>(left));
  const auto& peers = comm->volume().peers();
  EXPECT_EQ(peers[right].bytes_sent, 24 + 4);
  EXPECT_EQ(peers[right].messages_sent, 2);
  EXPECT_EQ(peers[left].bytes_received, 24 + 4);
  EXPECT_EQ(peers[left].messages_received, 2);
  EXPECT_EQ(comm->volume().bytes_sent(), 28);
  EXPECT_EQ(comm->volume().bytes_received(), 28);
  EXPECT_THROW(comm->send(x.data(), 1, DType::f32, n), InvalidArgument);
}

TEST_F(MpiCommunicatorTest, NeighbourExchangeOnTheRing) {
  const auto nb = comm->ring_neighbours();
  std::vector<double> mine(4, static_cast<double>(rank)), theirs(8, -1);
  comm->neighbor_exchange(nb, mine.data(), 4, DType::f64, theirs.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(theirs[i], nb[0]);
    EXPECT_EQ(theirs[4 + i], nb[1]);
  }
  // On two ranks left and right are one peer, which gets both messages.
  const auto& peers = comm->volume().peers();
  if (n == 2) {
    EXPECT_EQ(peers[1 - rank].bytes_sent, 64);
    EXPECT_EQ(peers[1 - rank].messages_sent, 2);
  } else {
    EXPECT_EQ(peers[nb[0]].bytes_sent, 32);
    EXPECT_EQ(peers[nb[1]].bytes_received, 32);
  }
  EXPECT_EQ(comm->volume().bytes_sent(), 64);
}

TEST_F(MpiCommunicatorTest, ReceiveFromWhicheverRankSendsFirst) {
  if (rank == 0) {
    std::set<int> sources;
    for (int i = 1; i < n; ++i) {
      int64_t v = -1;
      const int from = comm->recv_any(&v, 1, DType::i64, 9);
      EXPECT_EQ(v, 100 + from);
      sources.insert(from);
      EXPECT_EQ(comm->volume().peers()[from].bytes_received, 8);
    }
    EXPECT_EQ(static_cast<int>(sources.size()), n - 1);
    EXPECT_EQ(sources.count(0), 0u);
  } else {
    const int64_t v = 100 + rank;
    comm->send(&v, 1, DType::i64, 0, 9);
  }
}

TEST_F(MpiCommunicatorTest, NonblockingAllreduceAndBroadcast) {
  std::vector<double> a(1000, 1.0 + rank), b(10, rank == 0 ? 7.0 : 0.0);
  auto r1 = comm->iallreduce(a.data(), 1000, DType::f64, ReduceOp::mean);
  auto r2 = comm->ibroadcast(b.data(), 10, DType::f64, 0);
  r2->wait();
  r1->wait();
  EXPECT_TRUE(r1->done());
  EXPECT_DOUBLE_EQ(a[999], (n + 1) / 2.0);
  EXPECT_EQ(b[9], 7.0);
  EXPECT_EQ(comm->volume().collective_bytes("iallreduce"), 8000);
  EXPECT_EQ(comm->volume().collective_bytes("ibroadcast"), 80);
}

}  // namespace
}  // namespace d5
