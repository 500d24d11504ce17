// Reduction kernels of the CUDA backend (interfaces in reduce_kernels.h). Large groups get one
// block per output and a fixed-order shared-memory tree; small groups one thread per output
// summing in index order. Either way the result does not depend on scheduling, and sums are
// accumulated in double as the reference does.
#include "kernel_grid.h"
#include "op_stream.h"
#include "reduce_kernels.h"

#include <cmath>
#include <cstdint>

namespace d5::cuda {
inline namespace movement {

namespace {

using grid::blocks_for;
using grid::kThreads;
// Groups up to this size are reduced by one thread each: a block would mostly idle.
constexpr int64_t kSmallGroup = 32;


__device__ int64_t walk(const int64_t* dims, const int64_t* strides, int rank, int64_t i) {
  int64_t off = 0;
  for (int k = rank - 1; k >= 0; --k) {
    off += (i % dims[k]) * strides[k];
    i /= dims[k];
  }
  return off;
}

// The running state of one reduction: a double sum, or the best (value, flat index) so far.
struct Acc {
  double sum;
  float best;
  int64_t arg;
};

// Whether candidate (v, i) beats the current maximum (b, a): NaN beats numbers, then the larger
// value, then the smaller index, which makes the choice independent of the combining order.
__device__ bool beats(float v, int64_t i, float b, int64_t a) {
  if (i < 0) return false;
  if (a < 0) return true;
  const bool vn = isnan(v), bn = isnan(b);
  if (vn != bn) return vn;
  if (!vn && v != b) return v > b;
  return i < a;
}

__device__ void add(Acc& acc, float v, int64_t i, ReduceKind kind) {
  if (kind == ReduceKind::Max) {
    if (beats(v, i, acc.best, acc.arg)) {
      acc.best = v;
      acc.arg = i;
    }
  } else {
    const double d = static_cast<double>(v);
    acc.sum += kind == ReduceKind::L2 ? d * d : d;
  }
}

__device__ void merge(Acc& acc, const Acc& o, ReduceKind kind) {
  if (kind == ReduceKind::Max) {
    if (beats(o.best, o.arg, acc.best, acc.arg)) {
      acc.best = o.best;
      acc.arg = o.arg;
    }
  } else {
    acc.sum += o.sum;
  }
}

__device__ void store(const Acc& acc, float* y, int64_t* argmax, int64_t o, int64_t group, ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max:
      y[o] = acc.arg < 0 ? -INFINITY : acc.best;
      if (argmax) argmax[o] = acc.arg;
      break;
    case ReduceKind::Mean:
      y[o] = static_cast<float>(acc.sum / static_cast<double>(group));
      break;
    case ReduceKind::L2:
      y[o] = static_cast<float>(sqrt(acc.sum));
      break;
    default:
      y[o] = static_cast<float>(acc.sum);
  }
}

__global__ void reduce_thread_kernel(const float* x, float* y, int64_t* argmax, int64_t outputs, int64_t group,
                                     ReducePlan p, ReduceKind kind) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = walk(p.out_dims, p.out_strides, p.out_rank, o);
    Acc acc{0.0, 0.0f, -1};
    for (int64_t j = 0; j < group; ++j) {
      const int64_t i = base + walk(p.red_dims, p.red_strides, p.red_rank, j);
      add(acc, x[i], i, kind);
    }
    store(acc, y, argmax, o, group, kind);
  }
}

__global__ void reduce_block_kernel(const float* x, float* y, int64_t* argmax, int64_t outputs, int64_t group,
                                    ReducePlan p, ReduceKind kind) {
  __shared__ double sums[kThreads];
  __shared__ float bests[kThreads];
  __shared__ int64_t args[kThreads];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = walk(p.out_dims, p.out_strides, p.out_rank, o);
    Acc acc{0.0, 0.0f, -1};
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x) {
      const int64_t i = base + walk(p.red_dims, p.red_strides, p.red_rank, j);
      add(acc, x[i], i, kind);
    }
    sums[threadIdx.x] = acc.sum;
    bests[threadIdx.x] = acc.best;
    args[threadIdx.x] = acc.arg;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) {
        Acc mine{sums[threadIdx.x], bests[threadIdx.x], args[threadIdx.x]};
        merge(mine, Acc{sums[threadIdx.x + s], bests[threadIdx.x + s], args[threadIdx.x + s]}, kind);
        sums[threadIdx.x] = mine.sum;
        bests[threadIdx.x] = mine.best;
        args[threadIdx.x] = mine.arg;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) store(Acc{sums[0], bests[0], args[0]}, y, argmax, o, group, kind);
    __syncthreads();  // the shared arrays are reused by the next output
  }
}

__global__ void reduce_backward_kernel(const float* gy, const float* x, const float* y, float* gx, int64_t n,
                                       StridedMap m, ReduceKind kind, int64_t group) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = walk(m.dims, m.strides, m.rank, i) + m.base;
    const double g = static_cast<double>(gy[o]);
    double v = g;
    if (kind == ReduceKind::Mean) v = g / static_cast<double>(group);
    // d sqrt(sum x^2) / dx = x / y; at y = 0 every x is 0 and the subgradient 0 is used.
    if (kind == ReduceKind::L2) v = y[o] == 0.0f ? 0.0 : g * static_cast<double>(x[i]) / static_cast<double>(y[o]);
    gx[i] = static_cast<float>(v);
  }
}

__global__ void scatter_argmax_kernel(const float* gy, const int64_t* argmax, float* gx, int64_t outputs) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < outputs;
       o += int64_t{gridDim.x} * blockDim.x)
    if (argmax[o] >= 0) gx[argmax[o]] = gy[o];  // each input element is the maximum of one output at most
}

}  // namespace

void reduce_f32(const float* x, float* y, int64_t* argmax, int64_t outputs, int64_t group, const ReducePlan& p,
                ReduceKind kind, cudaStream_t stream) {
  if (outputs <= 0) return;
  if (group <= kSmallGroup)
    reduce_thread_kernel<<<blocks_for(outputs, kThreads), kThreads, 0, launch_stream(stream)>>>(x, y, argmax, outputs, group, p,
                                                                                 kind);
  else
    reduce_block_kernel<<<blocks_for(outputs, 1), kThreads, 0, launch_stream(stream)>>>(x, y, argmax, outputs, group, p, kind);
}

void reduce_backward_f32(const float* gy, const float* x, const float* y, float* gx, int64_t n,
                         const StridedMap& to_out, ReduceKind kind, int64_t group, cudaStream_t stream) {
  if (n <= 0) return;
  reduce_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, launch_stream(stream)>>>(gy, x, y, gx, n, to_out, kind, group);
}

void reduce_max_backward_f32(const float* gy, const int64_t* argmax, float* gx, int64_t n, int64_t outputs,
                             cudaStream_t stream) {
  if (n > 0) cudaMemsetAsync(gx, 0, static_cast<size_t>(n) * sizeof(float), launch_stream(stream));
  if (outputs > 0)
    scatter_argmax_kernel<<<blocks_for(outputs, kThreads), kThreads, 0, launch_stream(stream)>>>(gy, argmax, gx, outputs);
}

}  // inline namespace movement
}  // namespace d5::cuda
