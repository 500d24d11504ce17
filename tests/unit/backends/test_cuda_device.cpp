// Tensors in GPU memory (cuda:N) through the CUDA backend's caching allocator. On a machine
// without a CUDA device the GPU tests are skipped with the reason (ctest lists them as skipped),
// and the one test that runs there checks that device memory is refused with that reason.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda_test_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/device_allocator.h"
#include "deep500/core/tensor.h"

namespace d5 {
namespace {

using test::no_gpu_reason;

TEST(CudaMemory, WithoutADeviceAllocationIsRefusedWithTheReason) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a CUDA device";
  const Device gpu = parse_device("cuda:0");
  EXPECT_FALSE(host_accessible(gpu));
  try {
    Tensor t(TensorDesc{DType::f32, Shape{16}}, gpu);
    FAIL() << "device memory was handed out without a device";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CudaMemory, ValuesRoundTripAndHostAccessIsRefused) {
  D5_REQUIRE_GPU();
  const Tensor x = Tensor::from_values<float>(Shape{2, 3}, {1, -2, 3, -4, 5, -6});
  const Tensor on_gpu = x.to(parse_device("cuda:0"));
  EXPECT_EQ(on_gpu.device().to_string(), "cuda:0");
  EXPECT_THROW((void)on_gpu.data_as<float>(), InvalidArgument);
  const Tensor back = on_gpu.to(Device::cpu());
  ASSERT_EQ(back.numel(), 6);
  EXPECT_EQ(std::memcmp(back.data_as<float>(), x.data_as<float>(), 6 * sizeof(float)), 0);
}

TEST(CudaMemory, FreedBlocksAreReusedAndCounted) {
  D5_REQUIRE_GPU();
  DeviceAllocator& a = allocator_for(parse_device("cuda:0"));
  const auto before = a.stats(0);
  { Tensor t(TensorDesc{DType::f32, Shape{1 << 20}}, parse_device("cuda:0")); }
  { Tensor t(TensorDesc{DType::f32, Shape{1 << 20}}, parse_device("cuda:0")); }
  const auto after = a.stats(0);
  EXPECT_EQ(after.allocations - before.allocations, 2);
  EXPECT_GE(after.cache_hits - before.cache_hits, 1);
  EXPECT_GE(after.peak_bytes, int64_t{4} << 20);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(CudaMemory, ZeroedTensorsReadBackAsZeros) {
  D5_REQUIRE_GPU();
  const Tensor z(TensorDesc{DType::f64, Shape{257}}, parse_device("cuda:0"));
  const Tensor h = z.to(Device::cpu());
  for (int64_t i = 0; i < h.numel(); ++i) EXPECT_EQ(h.data_as<double>()[i], 0.0) << i;
}

// The data loader's path: page-locked staging memory from a cache, copied on the copy stream.
TEST(CudaMemory, StagedCopiesArriveAndStagingBuffersAreReused) {
  D5_REQUIRE_GPU();
  const Device gpu = parse_device("cuda:0");
  DeviceAllocator& a = allocator_for(gpu);
  const Tensor x = Tensor::from_values<float>(Shape{5}, {1.5f, -2, 3, 0.25f, -7});
  void* first = nullptr;
  for (int round = 0; round < 2; ++round) {
    std::shared_ptr<void> staging = a.allocate_staging(x.bytes(), 0);
    ASSERT_TRUE(staging) << "CUDA has page-locked staging memory";
    if (round == 0) first = staging.get();
    if (round == 1) {
      EXPECT_EQ(staging.get(), first) << "the freed staging block is reused";
    }
    std::memcpy(staging.get(), x.data(), x.bytes());
    Tensor on_gpu = Tensor::uninitialized(x.desc(), gpu);
    a.copy_from_staging(on_gpu.data(), staging.get(), x.bytes(), 0);
    const Tensor back = on_gpu.to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.data(), x.data(), x.bytes()), 0) << "round " << round;
  }
}

TEST(CudaMemory, OutOfMemoryNamesTheSizes) {
  D5_REQUIRE_GPU();
  try {
    Tensor t(TensorDesc{DType::f32, Shape{int64_t{1} << 48}}, parse_device("cuda:0"));
    FAIL() << "a petabyte fitted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory on cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d5
