// The recurrent operators' data-movement kernels (rnn_kernels.h): grid-stride loops over 64-bit
// indices, one output element per step.
#include "kernel_grid.h"
#include "op_stream.h"
#include "rnn_kernels.h"

namespace d5::cuda::rnn_kernels {

namespace {

using grid::blocks_for;
using grid::kThreads;

__global__ void reverse_kernel(const float* src, float* dst, const int32_t* lens, int64_t seq, int64_t batch,
                               int64_t width, bool batch_major) {
  const int64_t n = seq * batch * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t v = i % width, row = i / width;
    const int64_t t = batch_major ? row % seq : row / batch;
    const int64_t b = batch_major ? row / seq : row % batch;
    const int64_t len = lens[b];
    float value = 0.0f;
    if (t < len) {
      const int64_t ts = len - 1 - t;
      const int64_t src_row = batch_major ? b * seq + ts : ts * batch + b;
      value = src[src_row * width + v];
    }
    dst[i] = value;
  }
}

__global__ void swap_kernel(const float* src, float* dst, int64_t outer, int64_t n1, int64_t n2, int64_t width) {
  const int64_t n = outer * n1 * n2 * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    // i indexes dst [outer, n2, n1, width].
    const int64_t v = i % width;
    int64_t r = i / width;
    const int64_t j1 = r % n1;
    r /= n1;
    const int64_t j2 = r % n2;
    const int64_t a = r / n2;
    dst[i] = src[((a * n1 + j1) * n2 + j2) * width + v];
  }
}

}  // namespace

void reverse_sequences(const float* src, float* dst, const int32_t* lens, int64_t seq, int64_t batch, int64_t width,
                       bool batch_major, cudaStream_t stream) {
  const int64_t n = seq * batch * width;
  if (n == 0) return;
  reverse_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(src, dst, lens, seq, batch, width, batch_major);
}

void swap_middle_axes(const float* src, float* dst, int64_t outer, int64_t n1, int64_t n2, int64_t width,
                      cudaStream_t stream) {
  const int64_t n = outer * n1 * n2 * width;
  if (n == 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(src, dst, outer, n1, n2, width);
}

}  // namespace d5::cuda::rnn_kernels
