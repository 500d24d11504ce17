#pragma once
// Host entry points of the recurrent operators' data-movement kernels (rnn_kernels.cu), for
// cudnn_rnn.cpp. Plain C++17; every function launches on `stream` and returns without waiting.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda::rnn_kernels {

// Rows of `width` floats at (t, b), row (t * batch + b) seq-major or (b * seq + t) batch-major:
// dst(t, b) = src(lens[b] - 1 - t, b) for t < lens[b], zeros past a sequence's end. Its own
// inverse for the same lens (device int32, each in [0, seq]).
void reverse_sequences(const float* src, float* dst, const int32_t* lens, int64_t seq, int64_t batch, int64_t width,
                       bool batch_major, cudaStream_t stream);

// dst[a, j2, j1, :] = src[a, j1, j2, :]: swaps the middle axes of [outer, n1, n2, width].
void swap_middle_axes(const float* src, float* dst, int64_t outer, int64_t n1, int64_t n2, int64_t width,
                      cudaStream_t stream);

}  // namespace d5::cuda::rnn_kernels
