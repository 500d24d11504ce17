#include "cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "cuda_common.h"
#include "nvml.h"

namespace d5::cuda {

namespace {

// Makes `index` the calling thread's device, or says why it cannot be used.
void use_device(int32_t index, const char* what) {
  int count = 0;
  const cudaError_t listed = cudaGetDeviceCount(&count);
  D5_CHECK_ARG(listed == cudaSuccess && index >= 0 && index < count,
               "{} on cuda:{}: {}", what, index,
               listed != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(listed)
                                     : fmt::format("this machine has {} CUDA device(s)", count));
  const cudaError_t set = cudaSetDevice(index);
  D5_CHECK(set == cudaSuccess, Internal, "{} on cuda:{}: cudaSetDevice: {}", what, index, cudaGetErrorString(set));
}

void check(cudaError_t e, const char* call, int32_t index) {
  D5_CHECK(e == cudaSuccess, Internal, "{} on cuda:{}: {}", call, index, cudaGetErrorString(e));
}

}  // namespace

void* CudaAllocator::raw_allocate(size_t bytes, int32_t index) {
  use_device(index, "allocating device memory");
  void* p = nullptr;
  // A step being recorded as a CUDA graph allocates from its pool, and cudaMalloc is not
  // captured: under the capture's thread-local mode it would fail, so it runs relaxed.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t e = cudaMalloc(&p, bytes);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // reset the last-error state, so a later check does not report this one
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    D5_THROW(InvalidArgument,
             "out of device memory on cuda:{}: {} bytes requested, {} of {} bytes free; use a smaller batch or "
             "model",
             index, bytes, free, total);
  }
  check(e, "cudaMalloc", index);
  return p;
}

void CudaAllocator::raw_free(void* data, int32_t index) {
  if (cudaSetDevice(index) == cudaSuccess) cudaFree(data);  // never throws: runs in destructors
}

namespace {
// The operators' stream of cuda:0 (op_stream.h); other devices use their legacy stream.
cudaStream_t stream_for(int32_t index) { return index == kOpDevice ? op_stream() : nullptr; }
}  // namespace

// Asynchronous, as cudaMemset of device memory is: ordered before the work that reads the zeros,
// and inside a capture part of the graph.
void CudaAllocator::zero(void* data, size_t bytes, int32_t index) {
  use_device(index, "zeroing device memory");
  check(cudaMemsetAsync(data, 0, bytes, stream_for(index)), "cudaMemsetAsync", index);
}

// Waited for (copy_between_devices' promise), except inside a capture, where it is part of the
// graph and waiting is not allowed.
bool CudaAllocator::copy_within(void* dst, const void* src, size_t bytes, int32_t index) {
  use_device(index, "copying device memory");
  const cudaStream_t s = stream_for(index);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync", index);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (s) check(cudaStreamIsCapturing(s, &capturing), "cudaStreamIsCapturing", index);
  if (capturing == cudaStreamCaptureStatusNone) check(cudaStreamSynchronize(s), "cudaStreamSynchronize", index);
  return true;
}

void CudaAllocator::copy_to_host(void* host, const void* device, size_t bytes, int32_t index) {
  use_device(index, "copying device memory to the host");
  check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)", index);
}

void CudaAllocator::copy_from_host(void* device, const void* host, size_t bytes, int32_t index) {
  use_device(index, "copying host memory to the device");
  check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)", index);
}

void CudaAllocator::synchronize(int32_t index) {
  use_device(index, "synchronizing");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", index);
}

namespace {

class CudaEventTimer final : public DeviceTimer {
 public:
  explicit CudaEventTimer(int32_t index) : index_(index) {
    use_device(index, "creating CUDA events");
    check(cudaEventCreate(&start_), "cudaEventCreate", index);
    check(cudaEventCreate(&stop_), "cudaEventCreate", index);
  }
  ~CudaEventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  void start() override { check(cudaEventRecord(start_, nullptr), "cudaEventRecord", index_); }
  void stop() override { check(cudaEventRecord(stop_, nullptr), "cudaEventRecord", index_); }
  double seconds() override {
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize", index_);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime", index_);
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  int32_t index_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceTimer> CudaAllocator::make_timer(int32_t index) { return std::make_unique<CudaEventTimer>(index); }

bool CudaAllocator::flush_caches(int32_t index) {
  std::lock_guard lock(flush_mutex_);
  auto& buffer = flush_buffers_[index];
  if (!buffer) {
    use_device(index, "flushing the L2 cache");
    int l2 = 0;
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, index), "cudaDeviceGetAttribute", index);
    if (l2 <= 0) return false;
    flush_bytes_[index] = 2 * static_cast<size_t>(l2);
    // Straight from the device, not through the cache: the flush buffer is the benchmark's, and
    // must not count in the high-water mark of the work it measures.
    buffer = std::shared_ptr<void>(raw_allocate(flush_bytes_[index], index), [this, index](void* p) { raw_free(p, index); });
  }
  use_device(index, "flushing the L2 cache");
  check(cudaMemsetAsync(buffer.get(), 0, flush_bytes_[index], nullptr), "cudaMemsetAsync", index);
  return true;
}

namespace {

class NvmlSensors final : public DeviceSensors {
 public:
  NvmlSensors(const Nvml& n, std::string pci_bus_id) : nvml_(n), bus_(std::move(pci_bus_id)) {}
  std::string source() const override { return "NVML " + nvml_.version() + " (GPU " + bus_ + ")"; }
  std::optional<DeviceSensorReading> read(std::string* reason) const override {
    const auto s = nvml_.sample(bus_, reason);
    if (!s) return std::nullopt;
    DeviceSensorReading r;
    if (s->energy_mj) r.energy_joules = static_cast<double>(*s->energy_mj) * 1e-3;
    r.sm_clock_mhz = s->sm_clock_mhz;
    r.memory_clock_mhz = s->memory_clock_mhz;
    r.throttle_reasons = throttle_reasons(s->clock_event_reasons);
    r.utilization = s->utilization_percent / 100.0;
    return r;
  }

 private:
  const Nvml& nvml_;  // the process's, never closed
  std::string bus_;
};

}  // namespace

std::shared_ptr<const DeviceSensors> CudaAllocator::sensors(int32_t index, std::string* reason) const {
  const Nvml* n = nvml(reason);
  if (!n) return nullptr;
  char bus[32] = {};
  if (const cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, index); e != cudaSuccess) {
    cudaGetLastError();
    if (reason) *reason = fmt::format("no PCI bus id for cuda:{}: {}", index, cudaGetErrorString(e));
    return nullptr;
  }
  return std::make_shared<NvmlSensors>(*n, bus);
}

}  // namespace d5::cuda
