// Loss kernels of the CUDA backend (interfaces in loss_kernels.h). Lanes along the class axis
// get one block each with fixed-order shared-memory trees; the final sums over positions run in
// one block. Nothing depends on scheduling, and every sum is accumulated in double as the
// reference does.
#include "kernel_grid.h"
#include "op_stream.h"
#include "loss_kernels.h"

#include <cmath>
#include <cstdint>

namespace d5::cuda {
inline namespace movement {

namespace {

using grid::blocks_for;
using grid::kThreads;
constexpr int kMaxLaneThreads = 128;


// Threads per lane: a power of two, small for few classes so that blocks do not idle.
int lane_threads(int64_t c) { return c <= 32 ? 32 : c <= 64 ? 64 : kMaxLaneThreads; }

// Reduces v over the block (blockDim.x a power of two) in a fixed tree; all threads get it.
template <bool Max>
__device__ double block_reduce(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      sh[threadIdx.x] = Max ? fmax(sh[threadIdx.x], sh[threadIdx.x + s]) : sh[threadIdx.x] + sh[threadIdx.x + s];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

__device__ int64_t target_at(const Targets& t, int64_t p) {
  return t.is64 ? static_cast<const int64_t*>(t.labels)[p] : static_cast<const int32_t*>(t.labels)[p];
}

// The class of position p, or -1 where it is ignored or out of range; sets *w.
__device__ int64_t class_at(const Targets& t, int64_t p, double* w) {
  const int64_t k = target_at(t, p);
  *w = 0;
  if ((t.has_ignore && k == t.ignore) || k < 0 || k >= t.c) return -1;
  *w = t.weights ? static_cast<double>(t.weights[k]) : 1.0;
  return k;
}

__device__ double upstream(const float* gy, int64_t p, const double* total_w, LossReduction r) {
  if (!gy) return 0;
  if (r == LossReduction::None) return static_cast<double>(gy[p]);
  if (r == LossReduction::Sum) return static_cast<double>(gy[0]);
  return static_cast<double>(gy[0]) / *total_w;
}

__global__ void log_softmax_kernel(const float* x, float* logp, int64_t n, int64_t c, int64_t d) {
  __shared__ double sh[kMaxLaneThreads];
  for (int64_t lane = blockIdx.x; lane < n * d; lane += gridDim.x) {
    const int64_t base = (lane / d) * c * d + lane % d;
    double mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) mx = fmax(mx, static_cast<double>(x[base + k * d]));
    mx = block_reduce<true>(mx, sh);
    double s = 0;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) s += exp(static_cast<double>(x[base + k * d]) - mx);
    const double log_sum = log(block_reduce<false>(s, sh));
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
      logp[base + k * d] = static_cast<float>((static_cast<double>(x[base + k * d]) - mx) - log_sum);
  }
}

__global__ void nll_positions_kernel(const float* logp, Targets t, double* loss, double* weight,
                                     unsigned long long* bad_pos) {
  const int64_t positions = t.n * t.d;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += int64_t{gridDim.x} * blockDim.x) {
    double w = 0;
    const int64_t k = class_at(t, p, &w);
    const int64_t raw = target_at(t, p);
    if (k < 0 && !(t.has_ignore && raw == t.ignore)) atomicMin(bad_pos, static_cast<unsigned long long>(p));
    loss[p] = k < 0 ? 0.0 : -w * static_cast<double>(logp[((p / t.d) * t.c + k) * t.d + p % t.d]);
    weight[p] = w;
  }
}

__global__ void finish_none_kernel(const double* loss, int64_t positions, float* out) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += int64_t{gridDim.x} * blockDim.x)
    out[p] = static_cast<float>(loss[p]);
}

__global__ void finish_sum_kernel(const double* loss, const double* weight, int64_t positions, LossReduction r,
                                  float* out, double* total_w) {
  __shared__ double sh[kThreads];
  double s = 0, w = 0;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
    s += loss[p];
    w += weight[p];
  }
  s = block_reduce<false>(s, sh);
  w = block_reduce<false>(w, sh);
  if (threadIdx.x == 0) {
    *total_w = w;
    if (r != LossReduction::None) out[0] = static_cast<float>(r == LossReduction::Sum ? s : s / w);
  }
}

__global__ void softmax_xent_backward_kernel(const float* logp, const float* gy, const float* glogp, Targets t,
                                             const double* total_w, LossReduction r, float* gx) {
  __shared__ double sh[kMaxLaneThreads];
  for (int64_t lane = blockIdx.x; lane < t.n * t.d; lane += gridDim.x) {
    const int64_t base = (lane / t.d) * t.c * t.d + lane % t.d;
    double w = 0;
    const int64_t cls = class_at(t, lane, &w);
    const double pull = cls < 0 ? 0.0 : w * upstream(gy, lane, total_w, r);
    double s = 0;
    for (int64_t k = threadIdx.x; k < t.c; k += blockDim.x)
      s += (glogp ? static_cast<double>(glogp[base + k * t.d]) : 0.0) - (k == cls ? pull : 0.0);
    const double dot = block_reduce<false>(s, sh);
    for (int64_t k = threadIdx.x; k < t.c; k += blockDim.x) {
      const int64_t j = base + k * t.d;
      const double g = (glogp ? static_cast<double>(glogp[j]) : 0.0) - (k == cls ? pull : 0.0);
      gx[j] = static_cast<float>(g - exp(static_cast<double>(logp[j])) * dot);
    }
  }
}

__global__ void nll_backward_kernel(const float* gy, Targets t, const double* total_w, LossReduction r, float* gx) {
  const int64_t positions = t.n * t.d;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += int64_t{gridDim.x} * blockDim.x) {
    double w = 0;
    const int64_t k = class_at(t, p, &w);
    if (k >= 0) gx[((p / t.d) * t.c + k) * t.d + p % t.d] = static_cast<float>(-w * upstream(gy, p, total_w, r));
  }
}

__global__ void mse_none_kernel(const float* p, const float* t, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(t[i]);
    out[i] = static_cast<float>(d * d);
  }
}

__global__ void mse_sum_kernel(const float* p, const float* t, int64_t n, LossReduction r, float* out) {
  __shared__ double sh[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(t[i]);
    s += d * d;
  }
  s = block_reduce<false>(s, sh);
  if (threadIdx.x == 0) out[0] = static_cast<float>(r == LossReduction::Sum ? s : s / static_cast<double>(n));
}

__global__ void mse_backward_kernel(const float* p, const float* t, const float* gy, int64_t n, LossReduction r,
                                    float* gp, float* gt) {
  const double scale = r == LossReduction::Mean ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double up = !gy ? 0.0 : static_cast<double>(gy[r == LossReduction::None ? i : 0]) * scale;
    const double d = 2 * (static_cast<double>(p[i]) - static_cast<double>(t[i])) * up;
    if (gp) gp[i] = static_cast<float>(d);
    if (gt) gt[i] = static_cast<float>(-d);
  }
}

}  // namespace

void log_softmax_lanes(const float* x, float* logp, int64_t n, int64_t c, int64_t d, cudaStream_t stream) {
  if (n * d <= 0 || c <= 0) return;
  log_softmax_kernel<<<blocks_for(n * d, 1), lane_threads(c), 0, launch_stream(stream)>>>(x, logp, n, c, d);
}

void nll_positions(const float* logp, const Targets& t, double* loss, double* weight, unsigned long long* bad_pos,
                   cudaStream_t stream) {
  const int64_t positions = t.n * t.d;
  if (positions <= 0) return;
  nll_positions_kernel<<<blocks_for(positions, kThreads), kThreads, 0, launch_stream(stream)>>>(logp, t, loss, weight, bad_pos);
}

void finish_loss(const double* loss, const double* weight, int64_t positions, LossReduction r, float* out,
                 double* total_w, cudaStream_t stream) {
  if (r == LossReduction::None && positions > 0)
    finish_none_kernel<<<blocks_for(positions, kThreads), kThreads, 0, launch_stream(stream)>>>(loss, positions, out);
  finish_sum_kernel<<<1, kThreads, 0, launch_stream(stream)>>>(loss, weight, positions, r, out, total_w);
}

void softmax_xent_backward(const float* logp, const float* gy, const float* glogp, const Targets& t,
                           const double* total_w, LossReduction r, float* gx, cudaStream_t stream) {
  if (t.n * t.d <= 0 || t.c <= 0) return;
  softmax_xent_backward_kernel<<<blocks_for(t.n * t.d, 1), lane_threads(t.c), 0, launch_stream(stream)>>>(logp, gy, glogp, t,
                                                                                          total_w, r, gx);
}

void nll_backward(const float* gy, const Targets& t, const double* total_w, LossReduction r, float* gx,
                  cudaStream_t stream) {
  const int64_t numel = t.n * t.c * t.d;
  if (numel > 0) cudaMemsetAsync(gx, 0, static_cast<size_t>(numel) * sizeof(float), launch_stream(stream));
  if (t.n * t.d > 0 && gy)
    nll_backward_kernel<<<blocks_for(t.n * t.d, kThreads), kThreads, 0, launch_stream(stream)>>>(gy, t, total_w, r, gx);
}

void mse_forward(const float* p, const float* t, int64_t n, LossReduction r, float* out, cudaStream_t stream) {
  if (r == LossReduction::None) {
    if (n > 0) mse_none_kernel<<<blocks_for(n, kThreads), kThreads, 0, launch_stream(stream)>>>(p, t, n, out);
    return;
  }
  mse_sum_kernel<<<1, kThreads, 0, launch_stream(stream)>>>(p, t, n, r, out);
}

void mse_backward(const float* p, const float* t, const float* gy, int64_t n, LossReduction r, float* gp,
                  float* gt, cudaStream_t stream) {
  if (n <= 0) return;
  mse_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, launch_stream(stream)>>>(p, t, gy, n, r, gp, gt);
}

}  // inline namespace movement
}  // namespace d5::cuda
