#pragma once
// Kernels that measure a GPU's peaks (peak_kernels.cu): dependent f32 FMA chains, and a copy
// between two device buffers. Plain C++17 so that nvcc never sees d5's headers.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda::kernels {

// Independent FMA chains each thread of `blocks` x `threads` keeps in registers.
inline constexpr int kPeakChains = 8;

// Rounds of the chains per loop trip; `iterations` is rounded up to a multiple of it.
inline constexpr int kPeakUnroll = 16;

// Every thread runs kPeakChains chains of `iterations` dependent FMAs; `sink` receives a value
// only the compiler cannot rule out, so the work is not optimised away.
void fma_chains(float* sink, int blocks, int threads, int64_t iterations, cudaStream_t s);

// dst = src over `bytes` (a multiple of 16): 16-byte loads and stores, a grid-stride loop.
void copy_16b(void* dst, const void* src, int64_t bytes, int blocks, cudaStream_t s);

}  // namespace d5::cuda::kernels
