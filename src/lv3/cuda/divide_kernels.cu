// The mean's division on the GPU (divide_kernels.h).
#include "divide_kernels.h"

namespace d5::cuda_dist {

namespace {

template <typename T>
__global__ void divide_kernel(T* data, int64_t count, T ranks) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    data[i] = data[i] / ranks;
  }
}

}  // namespace

cudaError_t divide(void* data, int64_t count, bool f64, int ranks, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 4096 ? wanted : 4096);
  if (f64) {
    divide_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<double*>(data), count, static_cast<double>(ranks));
  } else {
    divide_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), count, static_cast<float>(ranks));
  }
  return cudaGetLastError();
}

}  // namespace d5::cuda_dist
