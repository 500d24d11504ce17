#pragma once
// Device memory of NVIDIA GPUs ("cuda:N", docs/devices.md): cudaMalloc behind the core's caching
// allocator, because cudaMalloc and cudaFree synchronise the whole device and a training step
// allocates and frees the same sizes every iteration. Copies and fills run on the operators'
// stream (op_stream.h: the legacy default stream, except while a step is recorded as a CUDA
// graph); copies are waited for, so a tensor's bytes are where they should be when a call
// returns, and fills are ordered before the work that reads them.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "deep500/core/device_allocator.h"

namespace d5::cuda {

class CudaAllocator final : public CachingDeviceAllocator {
 public:
  std::string kind_name() const override { return "cuda"; }
  bool host_accessible() const override { return false; }
  void zero(void* data, size_t bytes, int32_t index) override;
  void copy_to_host(void* host, const void* device, size_t bytes, int32_t index) override;
  void copy_from_host(void* device, const void* host, size_t bytes, int32_t index) override;
  bool copy_within(void* dst, const void* src, size_t bytes, int32_t index) override;
  void synchronize(int32_t index) override;
  // Page-locked host memory from a cache (cudaHostAlloc synchronises the device), and copies from
  // it on a non-blocking stream of the device's own (cuda_staging.cpp).
  std::shared_ptr<void> allocate_staging(size_t bytes, int32_t index) override;
  void copy_from_staging(void* device, const void* staging, size_t bytes, int32_t index) override;
  // CUDA events on the default stream, where the backend's operators run.
  std::unique_ptr<DeviceTimer> make_timer(int32_t index) override;
  // Overwrites a buffer of twice the L2 cache, kept for the process.
  bool flush_caches(int32_t index) override;
  // NVML's counters of the GPU (nvml.h), found by its PCI bus id.
  std::shared_ptr<const DeviceSensors> sensors(int32_t index, std::string* reason) const override;

 protected:
  void* raw_allocate(size_t bytes, int32_t index) override;
  void raw_free(void* data, int32_t index) override;

 private:
  struct Staging;
  std::shared_ptr<Staging> staging();
  std::mutex staging_mutex_;
  std::shared_ptr<Staging> staging_;
  std::mutex flush_mutex_;
  std::unordered_map<int32_t, std::shared_ptr<void>> flush_buffers_;
  std::unordered_map<int32_t, size_t> flush_bytes_;
};

}  // namespace d5::cuda
