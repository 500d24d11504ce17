// CommunicationVolume: counters, the nccl-tests bus factors, JSON.
#include <gtest/gtest.h>

#include "deep500/dist/communication_volume.h"
#include "deep500/core/error.h"

namespace d5 {
namespace {

TEST(CommunicationVolume, CountsPerPeerAndPerCollective) {
  CommunicationVolume v(3);
  v.record_send(1, 100);
  v.record_send(1, 20);
  v.record_receive(2, 8);
  v.record_collective("allreduce", 400, 0.5);
  v.record_collective("allreduce", 400, 0.5);
  v.add_time(1.0);
  EXPECT_EQ(v.peers()[1].bytes_sent, 120);
  EXPECT_EQ(v.peers()[1].messages_sent, 2);
  EXPECT_EQ(v.peers()[2].messages_received, 1);
  EXPECT_EQ(v.bytes_sent(), 120);
  EXPECT_EQ(v.bytes_received(), 8);
  EXPECT_EQ(v.collective_bytes("allreduce"), 800);
  EXPECT_EQ(v.collective_bytes("broadcast"), 0);
  EXPECT_DOUBLE_EQ(v.collectives().at("allreduce").algbw(), 800.0);
  // nccl-tests: allreduce busbw = algbw x 2(n-1)/n.
  EXPECT_DOUBLE_EQ(v.busbw("allreduce"), 800.0 * 4.0 / 3.0);
  const auto j = v.to_json();
  EXPECT_EQ(j["peers"][1]["bytes_sent"], 120);
  EXPECT_EQ(j["collectives"]["allreduce"]["calls"], 2);
  v.reset();
  EXPECT_EQ(v.bytes_sent(), 0);
  EXPECT_TRUE(v.collectives().empty());
  EXPECT_EQ(v.time_s(), 0);
}

// A device library's share of a collective (NCCL beside MPI) is counted within its totals.
TEST(CommunicationVolume, CountsTheDeviceLibrarysShareOfACollective) {
  CommunicationVolume v(2);
  v.record_collective("allreduce", 400, 0.25, /*on_device=*/true);
  v.record_collective("allreduce", 100, 0.25);
  const CollectiveVolume& c = v.collectives().at("allreduce");
  EXPECT_EQ(c.calls, 2);
  EXPECT_EQ(c.bytes, 500);
  EXPECT_EQ(c.device_calls, 1);
  EXPECT_EQ(c.device_bytes, 400);
  const auto j = v.to_json();
  EXPECT_EQ(j["collectives"]["allreduce"]["device_calls"], 1);
  EXPECT_EQ(j["collectives"]["allreduce"]["device_bytes"], 400);
}

TEST(CommunicationVolume, BusFactors) {
  EXPECT_DOUBLE_EQ(CommunicationVolume::bus_factor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(CommunicationVolume::bus_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(CommunicationVolume::bus_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(CommunicationVolume::bus_factor("allreduce", 1), 0.0);
}

TEST(CommunicationVolume, RefusesNoRanksAndUnknownPeers) {
  EXPECT_THROW(CommunicationVolume(0), InvalidArgument);
  CommunicationVolume v(2);
  EXPECT_THROW(v.record_send(2, 1), std::out_of_range);
}

}  // namespace
}  // namespace d5
