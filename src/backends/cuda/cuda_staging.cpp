// The CUDA allocator's staging path (DeviceAllocator::allocate_staging / copy_from_staging): how a
// data loader's worker fills device tensors while the device computes.
//
// Staging buffers are page-locked host memory (cudaHostAlloc), which the copy engine reads
// directly; pageable memory is first copied by the driver into a page-locked bounce buffer,
// synchronously. They come from a cache, since allocating and freeing page-locked memory
// synchronises the device.
//
// A copy runs on a non-blocking stream per device, which the operators' legacy default stream
// does not wait for. Device memory is handed out by a cache shared with the operators, and a block
// an operator freed may still be read by its queued kernels: the copy therefore waits for an event
// recorded on the compute stream when it is issued, so it overwrites nothing queued work still
// reads, and runs beside whatever compute is queued after. The calling thread (a loader worker)
// then waits for the copy's own event, never for the compute stream's later work.
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>

#include "cuda_allocator.h"
#include "deep500/core/error.h"

namespace d5::cuda {

namespace {

void check_staging(cudaError_t e, const char* call, int32_t index) {
  D5_CHECK(e == cudaSuccess, Internal, "{} on cuda:{} (staging copy): {}", call, index, cudaGetErrorString(e));
}

// Page-locked host blocks in the core's size classes. Host memory: zero and the copies are
// plain memory operations.
class PinnedHostCache final : public CachingDeviceAllocator {
 public:
  std::string kind_name() const override { return "cuda-pinned-host"; }
  bool host_accessible() const override { return true; }
  void zero(void* data, size_t bytes, int32_t) override { std::memset(data, 0, bytes); }
  void copy_to_host(void* host, const void* src, size_t bytes, int32_t) override { std::memcpy(host, src, bytes); }
  void copy_from_host(void* dst, const void* host, size_t bytes, int32_t) override { std::memcpy(dst, host, bytes); }
  ~PinnedHostCache() override { release_cached(0); }

 protected:
  void* raw_allocate(size_t bytes, int32_t index) override {
    void* p = nullptr;
    check_staging(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc", index);
    return p;
  }
  void raw_free(void* data, int32_t) override { cudaFreeHost(data); }  // never throws: destructors
};

}  // namespace

struct CudaAllocator::Staging {
  std::shared_ptr<PinnedHostCache> pinned = std::make_shared<PinnedHostCache>();
  std::mutex mutex;
  std::map<int32_t, cudaStream_t> streams;  // kept for the process, as the handles are

  cudaStream_t stream(int32_t index) {
    std::lock_guard lock(mutex);
    auto& s = streams[index];
    if (!s) check_staging(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", index);
    return s;
  }
};

std::shared_ptr<CudaAllocator::Staging> CudaAllocator::staging() {
  std::lock_guard lock(staging_mutex_);
  if (!staging_) staging_ = std::make_shared<Staging>();
  return staging_;
}

std::shared_ptr<void> CudaAllocator::allocate_staging(size_t bytes, int32_t) {
  // One cache for every device: page-locked memory is portable across them.
  return staging()->pinned->allocate(bytes, 0);
}

void CudaAllocator::copy_from_staging(void* device, const void* staging_memory, size_t bytes, int32_t index) {
  if (bytes == 0) return;
  D5_CHECK(cudaSetDevice(index) == cudaSuccess, InvalidArgument, "copying to cuda:{}: no such device", index);
  const cudaStream_t copies = staging()->stream(index);
  cudaEvent_t compute_point = nullptr, copied = nullptr;
  check_staging(cudaEventCreateWithFlags(&compute_point, cudaEventDisableTiming), "cudaEventCreate", index);
  check_staging(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "cudaEventCreate", index);
  cudaError_t e = cudaEventRecord(compute_point, nullptr);  // the legacy stream: the operators'
  if (e == cudaSuccess) e = cudaStreamWaitEvent(copies, compute_point, 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(device, staging_memory, bytes, cudaMemcpyHostToDevice, copies);
  if (e == cudaSuccess) e = cudaEventRecord(copied, copies);
  if (e == cudaSuccess) e = cudaEventSynchronize(copied);
  cudaEventDestroy(compute_point);
  cudaEventDestroy(copied);
  check_staging(e, "the staged copy", index);
}

}  // namespace d5::cuda
