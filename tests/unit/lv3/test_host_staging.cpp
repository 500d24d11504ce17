// Host staging of device tensors (host_staging.h) on one rank, in every build (MPI or not): a
// loopback communicator whose collectives on one rank leave the data as it is (a sum or a mean
// over one rank), and tensors on the tests' host-memory device "testmem", which host code may not
// read. Values are the inputs themselves; the staging counters are the tensors' bytes.
#include <gtest/gtest.h>

#include "../test_memory_device.h"
#include "one_rank_communicator.h"
#include "deep500/core/error.h"
#include "deep500/core/tensor.h"
#include "deep500/dist/communicator.h"
#include "deep500/dist/gradient_buckets.h"
#include "deep500/dist/host_staging.h"

namespace d5 {
namespace {

// A nonblocking call that completes when waited for, or when destroyed without a wait, as MPI's
// requests do; on completion it writes the result (the buffer doubled: a sum over "two ranks"
// whose data agree) into the buffer it was given, and it records the live tensor bytes at that
// moment, so a test can tell whether that buffer was still alive.
class LoopbackRequest : public CommRequest {
 public:
  LoopbackRequest(float* data, int64_t count, int64_t* live_bytes_at_completion)
      : data_(data), count_(count), live_(live_bytes_at_completion) {}
  ~LoopbackRequest() override {
    if (!completed_) complete();
  }

 protected:
  void do_wait() override { complete(); }

 private:
  void complete() {
    completed_ = true;
    *live_ = tensor_memory_stats().current_bytes;
    for (int64_t i = 0; i < count_; ++i) data_[i] *= 2;
  }
  float* data_;
  int64_t count_;
  int64_t* live_;
  bool completed_ = false;
};

// One rank whose nonblocking allreduce is the request above; every other call is OneRank's.
class Loopback final : public test::OneRank {
 public:
  std::string name() const override { return "loopback"; }
  int64_t live_bytes_at_completion = -1;

 protected:
  CommRequestPtr do_iallreduce(void* data, int64_t count, DType, ReduceOp) override {
    return std::make_unique<LoopbackRequest>(static_cast<float*>(data), count, &live_bytes_at_completion);
  }
};

Tensor on_test_device(std::initializer_list<float> values) {
  return Tensor::from_values<float>(Shape({static_cast<int64_t>(values.size())}), values).to(test::test_memory_device());
}

std::vector<float> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  return {h.data_as<float>(), h.data_as<float>() + h.numel()};
}

TEST(HostStaging, TensorCallsStageWhatTheCommunicatorCannotReachAndCountIt) {
  Loopback comm;
  EXPECT_FALSE(comm.reaches(test::test_memory_device()));
  Tensor t = on_test_device({1, 2, 3});
  comm.allreduce(t, ReduceOp::sum);
  comm.broadcast(t, 0);
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 2, 3}));
  const StagingVolume& s = comm.volume().staging();
  // allreduce: to the host and back; broadcast from the root: to the host only.
  EXPECT_EQ(s.bytes_to_host, 2 * 12);
  EXPECT_EQ(s.bytes_from_host, 12);
  EXPECT_EQ(s.copies_to_host, 2);
  EXPECT_EQ(s.copies_from_host, 1);
  // A host tensor is passed as it is.
  Tensor h = Tensor::from_values<float>(Shape({2}), {4, 5});
  comm.allreduce(h, ReduceOp::sum);
  EXPECT_EQ(comm.volume().staging().copies_to_host, 2);
}

TEST(HostStaging, ANonblockingAllreduceLandsInTheDeviceTensorWhenWaitedFor) {
  Loopback comm;
  Tensor t = on_test_device({1, 2, 3});
  auto request = comm.iallreduce(t, ReduceOp::sum);
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 2, 3}));  // not before completion
  request->wait();
  EXPECT_EQ(host_values(t), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(comm.volume().staging().bytes_from_host, 12);
}

// A request dropped without wait() completes in its destructor (MPI's wait), while the host copy
// it writes into is still allocated.
TEST(HostStaging, ADroppedRequestCompletesBeforeItsHostCopyIsFreed) {
  Loopback comm;
  Tensor t = on_test_device({1, 2, 3, 4});
  const int64_t before = tensor_memory_stats().current_bytes;
  comm.iallreduce(t, ReduceOp::sum).reset();
  EXPECT_GE(comm.live_bytes_at_completion, before + 16) << "the host copy was freed before the call completed";
  EXPECT_EQ(tensor_memory_stats().current_bytes, before);  // and freed after it
}

// The base's grouped allreduce is one nonblocking allreduce per buffer, each recorded, and a mean
// divides every buffer once all have completed.
TEST(HostStaging, ABaseGroupIsOneNonblockingAllreducePerBuffer) {
  Loopback comm;
  std::vector<float> a = {1, 2}, b = {3};
  std::vector<void*> data = {a.data(), b.data()};
  std::vector<int64_t> counts = {2, 1};
  auto request = comm.iallreduce_group(data, counts, DType::f32, ReduceOp::mean);
  EXPECT_EQ(a, (std::vector<float>{1, 2}));  // not before completion
  request->wait();
  // Loopback's nonblocking sum doubles; the mean over its one rank keeps that.
  EXPECT_EQ(a, (std::vector<float>{2, 4}));
  EXPECT_EQ(b, (std::vector<float>{6}));
  EXPECT_EQ(comm.volume().collectives().at("iallreduce").calls, 2);
  EXPECT_EQ(comm.volume().collectives().at("iallreduce").bytes, 12);
  std::vector<int64_t> wrong = {2};
  EXPECT_THROW(comm.iallreduce_group(data, wrong, DType::f32, ReduceOp::sum), InvalidArgument);
}

TEST(HostStaging, BucketsAndPackingStageDeviceTensors) {
  Loopback comm;
  std::vector<Tensor> ts = {on_test_device({1, 2}), on_test_device({3}), Tensor::from_values<float>(Shape({1}), {4})};
  TensorBuckets fused(1 << 20, /*nonblocking=*/true);  // all three in one bucket
  fused.allreduce(comm, ts, ReduceOp::sum);
  EXPECT_EQ(fused.buckets(), 1u);
  EXPECT_EQ(host_values(ts[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(host_values(ts[1]), (std::vector<float>{6}));
  EXPECT_EQ(ts[2].data_as<float>()[0], 8);
  // Only the two device tensors were staged, each way: 12 bytes.
  EXPECT_EQ(comm.volume().staging().bytes_to_host, 12);
  EXPECT_EQ(comm.volume().staging().bytes_from_host, 12);
  const std::vector<float> flat = pack_f32(ts, &comm.volume());
  EXPECT_EQ(flat, (std::vector<float>{2, 4, 6, 8}));
  unpack_f32({9, 8, 7, 6}, ts, &comm.volume());
  EXPECT_EQ(host_values(ts[0]), (std::vector<float>{9, 8}));
  EXPECT_EQ(host_values(ts[1]), (std::vector<float>{7}));
  EXPECT_EQ(ts[2].data_as<float>()[0], 6);
  EXPECT_EQ(comm.volume().staging().bytes_to_host, 24);
  EXPECT_EQ(comm.volume().staging().bytes_from_host, 24);
}

}  // namespace
}  // namespace d5
