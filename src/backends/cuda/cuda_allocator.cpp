#include "cuda_allocator.h"

#include <cuda_runtime_api.h>

#include "deep500/core/error.h"

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
  const cudaError_t e = cudaMalloc(&p, bytes);
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

void CudaAllocator::zero(void* data, size_t bytes, int32_t index) {
  use_device(index, "zeroing device memory");
  check(cudaMemset(data, 0, bytes), "cudaMemset", index);
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

}  // namespace d5::cuda
