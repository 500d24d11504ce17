// The CUDA runtime's answers for Level 3's device libraries (device_memory.h).
#include "device_memory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5::cuda_dist {

bool holds_device_memory(const void* data, int ordinal) {
  if (data == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, data) != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer is an answer, not an error to keep
    return false;
  }
  return (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) && a.device == ordinal;
}

std::string current_gpu_uuid(int* ordinal) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "";
  }
  cudaError_t e = cudaGetDevice(ordinal);
  D5_CHECK(e == cudaSuccess, IoError, "cudaGetDevice failed: {}", cudaGetErrorString(e));
  cudaDeviceProp p{};
  e = cudaGetDeviceProperties(&p, *ordinal);
  D5_CHECK(e == cudaSuccess, IoError, "cudaGetDeviceProperties failed: {}", cudaGetErrorString(e));
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    hex += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[i]));
  }
  return "GPU-" + hex;
}

}  // namespace d5::cuda_dist
