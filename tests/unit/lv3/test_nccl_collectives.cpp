// NCCL on a GPU (src/lv3/nccl/): one rank, whose host communicator is itself, so that a machine
// with one GPU runs it (two ranks on one GPU are refused: test_device_schemes_mpi.cpp). On one
// rank a sum leaves the values as they are, so the checks are that every call reaches NCCL on
// device memory and returns, that the volume counts it as the library's, and that the mean's
// division kernel rounds as the host's division. Elsewhere the test skips, naming what is missing.
#include <gtest/gtest.h>

#include <cstring>

#include "../backends/cuda_test_util.h"
#include "deep500/core/tensor.h"
#include "deep500/dist/device_aware_communicator.h"
#include "deep500/dist/nccl.h"
#include "one_rank_communicator.h"

namespace d5 {
namespace {

#define D5_REQUIRE_NCCL()                                                              \
  do {                                                                                 \
    D5_REQUIRE_GPU();                                                                  \
    if (nccl_build_version().empty()) GTEST_SKIP() << "no NCCL: this d5 was built without it"; \
  } while (0)

Tensor on_gpu(const std::vector<float>& values) {
  Tensor host(DType::f32, Shape({static_cast<int64_t>(values.size())}));
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  return host.to(Device::cuda(0));
}

std::vector<float> read(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  const auto* p = host.data_as<float>();
  return {p, p + host.numel()};
}

TEST(NcclOnGpu, EveryCollectiveOfOneRankRunsOnDeviceMemory) {
  D5_REQUIRE_NCCL();
  auto self = std::make_shared<test::OneRank>();
  DeviceAwareCommunicator c(self, make_nccl_collectives(*self));
  EXPECT_EQ(c.name().rfind("NCCL 2.", 0), 0u) << c.name();
  EXPECT_TRUE(c.reaches(Device::cuda(0)));
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 1e-3f, 7.0f};
  Tensor t = on_gpu(values);
  EXPECT_TRUE(c.device().holds(t.data()));
  EXPECT_FALSE(c.device().holds(values.data()));
  c.allreduce(t, ReduceOp::sum);
  c.allreduce(t, ReduceOp::max);
  c.broadcast(t, 0);
  c.iallreduce(t, ReduceOp::mean)->wait();
  auto request = c.ibroadcast(t.data(), t.numel(), DType::f32, 0);
  while (!request->test()) {
  }
  Tensor u = on_gpu(values);
  const std::vector<void*> group = {t.data(), u.data()};
  const std::vector<int64_t> counts = {t.numel(), u.numel()};
  c.iallreduce_group(group, counts, DType::f32, ReduceOp::mean)->wait();
  EXPECT_EQ(read(t), values);
  EXPECT_EQ(read(u), values);
  const CommunicationVolume& v = c.volume();
  EXPECT_EQ(v.collectives().at("allreduce").device_calls, 2);
  EXPECT_EQ(v.collectives().at("broadcast").device_bytes, 20);
  EXPECT_EQ(v.collectives().at("iallreduce").device_calls, 3);
  EXPECT_EQ(v.collectives().at("ibroadcast").device_calls, 1);
  EXPECT_EQ(v.staging().copies_to_host, 0);
}

TEST(NcclOnGpu, TheMeansDivisionRoundsAsTheHosts) {
  D5_REQUIRE_NCCL();
  auto self = std::make_shared<test::OneRank>();
  auto nccl = make_nccl_collectives(*self);
  std::vector<float> values;
  for (int i = 0; i < 10000; ++i) values.push_back(static_cast<float>(i) * 0.731f - 17.3f);
  Tensor t = on_gpu(values);
  nccl->divide(t.data(), t.numel(), DType::f32, 3);
  std::vector<float> want = values;
  divide_in_place(want.data(), static_cast<int64_t>(want.size()), DType::f32, 3);
  EXPECT_EQ(read(t), want);
}

}  // namespace
}  // namespace d5
