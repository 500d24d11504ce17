// Peak-measuring kernels (peak_kernels.h).
#include "peak_kernels.h"
#include "op_stream.h"

namespace d5::cuda::kernels {

namespace {

__global__ void fma_chains_kernel(float* sink, int64_t iterations) {
  // Multiplier and addend keep every chain finite and away from denormals: x -> 0.999999 x + 1e-6
  // converges to 1, where it stays.
  const float a = 0.999999f, b = 1e-6f;
  float x[kPeakChains];
#pragma unroll
  for (int c = 0; c < kPeakChains; ++c) x[c] = 1e-3f * static_cast<float>(threadIdx.x + c);
  // Each warp scheduler issues one instruction per clock, so loop bookkeeping between FMAs would
  // take issue slots from them: kPeakUnroll rounds of every chain per trip keep it below 1%.
  for (int64_t i = 0; i < iterations; i += kPeakUnroll) {
#pragma unroll
    for (int r = 0; r < kPeakUnroll; ++r) {
#pragma unroll
      for (int c = 0; c < kPeakChains; ++c) x[c] = fmaf(x[c], a, b);
    }
  }
  float sum = 0;
#pragma unroll
  for (int c = 0; c < kPeakChains; ++c) sum += x[c];
  if (sum == -1.0f) sink[blockIdx.x] = sum;  // never true; the compiler cannot know
}

__global__ void copy_kernel(float4* dst, const float4* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void fma_chains(float* sink, int blocks, int threads, int64_t iterations, cudaStream_t s) {
  fma_chains_kernel<<<blocks, threads, 0, launch_stream(s)>>>(sink, iterations);
}

void copy_16b(void* dst, const void* src, int64_t bytes, int blocks, cudaStream_t s) {
  copy_kernel<<<blocks, 512, 0, launch_stream(s)>>>(static_cast<float4*>(dst), static_cast<const float4*>(src), bytes / 16);
}

}  // namespace d5::cuda::kernels
