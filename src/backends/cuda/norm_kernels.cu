// LayerNormalization kernels of the CUDA backend (interfaces in norm_kernels.h): one block per
// row with fixed-order shared-memory trees for the row sums, and column sums for the
// parameters' gradients in fixed chunks, so results never depend on scheduling. Statistics and
// sums are computed in double, as the reference does.
#include "kernel_grid.h"
#include "op_stream.h"
#include "norm_kernels.h"

#include <cmath>
#include <cstdint>

namespace d5::cuda {
inline namespace movement {

namespace {

using grid::blocks_for;
using grid::kThreads;


// Sum of every thread's v over the block, returned to all threads; the tree's order is fixed.
__device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();  // sh is reused by the next sum
  return r;
}

__global__ void forward_kernel(const float* x, const float* scale, const float* bias, float* y, float* mean_out,
                               float* invstd_out, double* mean_d, double* invstd_d, int64_t rows, int64_t inner,
                               double epsilon) {
  __shared__ double sh[kThreads];
  const double m = static_cast<double>(inner);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * inner;
    double s = 0;
    for (int64_t q = threadIdx.x; q < inner; q += blockDim.x) s += static_cast<double>(xr[q]);
    const double mean = block_sum(s, sh) / m;
    double v = 0;
    for (int64_t q = threadIdx.x; q < inner; q += blockDim.x) {
      const double d = static_cast<double>(xr[q]) - mean;
      v += d * d;
    }
    const double inv = 1 / sqrt(block_sum(v, sh) / m + epsilon);
    for (int64_t q = threadIdx.x; q < inner; q += blockDim.x) {
      const double b = bias ? static_cast<double>(bias[q]) : 0.0;
      y[r * inner + q] = static_cast<float>((static_cast<double>(xr[q]) - mean) * inv * static_cast<double>(scale[q]) + b);
    }
    if (threadIdx.x == 0) {
      mean_out[r] = static_cast<float>(mean);
      invstd_out[r] = static_cast<float>(inv);
      mean_d[r] = mean;
      invstd_d[r] = inv;
    }
  }
}

__global__ void backward_x_kernel(const float* x, const float* dy, const float* scale, const double* mean_d,
                                  const double* invstd_d, const float* dmean, const float* dinvstd, float* dx,
                                  int64_t rows, int64_t inner) {
  __shared__ double sh[kThreads];
  const double m = static_cast<double>(inner);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * inner;
    const double mean = mean_d[r], inv = invstd_d[r];
    double s1 = 0, s2 = 0;
    if (dy) {
      for (int64_t q = threadIdx.x; q < inner; q += blockDim.x) {
        const double gh = static_cast<double>(dy[r * inner + q]) * static_cast<double>(scale[q]);
        s1 += gh;
        s2 += gh * (static_cast<double>(xr[q]) - mean) * inv;
      }
    }
    const double sum_gh = block_sum(s1, sh), sum_gh_xhat = block_sum(s2, sh);
    const double dm = dmean ? static_cast<double>(dmean[r]) : 0.0;
    // d invstd / d var = -invstd^3 / 2
    const double dv = dinvstd ? static_cast<double>(dinvstd[r]) * -0.5 * inv * inv * inv : 0.0;
    for (int64_t q = threadIdx.x; q < inner; q += blockDim.x) {
      const double gh = dy ? static_cast<double>(dy[r * inner + q]) * static_cast<double>(scale[q]) : 0.0;
      const double xc = static_cast<double>(xr[q]) - mean;
      double d = inv * (gh - (sum_gh + xc * inv * sum_gh_xhat) / m);
      if (dmean) d += dm / m;
      if (dinvstd) d += dv * 2 * xc / m;
      dx[r * inner + q] = static_cast<float>(d);
    }
  }
}

// partial[c][q] (dscale) and partial[chunks + c][q] (dbias) over rows [c * per, (c + 1) * per).
__global__ void params_partial_kernel(const float* x, const float* dy, const double* mean_d,
                                      const double* invstd_d, double* partial, int64_t rows, int64_t inner,
                                      int64_t chunks) {
  const int64_t per = (rows + chunks - 1) / chunks;
  const int64_t total = chunks * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i / inner, q = i % inner;
    const int64_t hi = (c + 1) * per < rows ? (c + 1) * per : rows;
    double ds = 0, db = 0;
    for (int64_t r = c * per; r < hi; ++r) {
      const double g = static_cast<double>(dy[r * inner + q]);
      ds += g * (static_cast<double>(x[r * inner + q]) - mean_d[r]) * invstd_d[r];
      db += g;
    }
    partial[i] = ds;
    partial[total + i] = db;
  }
}

__global__ void params_final_kernel(const double* partial, float* dscale, float* dbias, int64_t inner,
                                    int64_t chunks) {
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < inner; q += int64_t{gridDim.x} * blockDim.x) {
    double ds = 0, db = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      ds += partial[c * inner + q];
      db += partial[(chunks + c) * inner + q];
    }
    dscale[q] = static_cast<float>(ds);
    dbias[q] = static_cast<float>(db);
  }
}

}  // namespace

void layer_norm_forward(const float* x, const float* scale, const float* bias, float* y, float* mean_out,
                        float* invstd_out, double* mean, double* invstd, int64_t rows, int64_t inner, double epsilon,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  forward_kernel<<<blocks_for(rows, 1), kThreads, 0, launch_stream(stream)>>>(x, scale, bias, y, mean_out, invstd_out, mean, invstd,
                                                            rows, inner, epsilon);
}

void layer_norm_backward_x(const float* x, const float* dy, const float* scale, const double* mean,
                           const double* invstd, const float* dmean, const float* dinvstd, float* dx, int64_t rows,
                           int64_t inner, cudaStream_t stream) {
  if (rows <= 0 || inner <= 0) return;
  backward_x_kernel<<<blocks_for(rows, 1), kThreads, 0, launch_stream(stream)>>>(x, dy, scale, mean, invstd, dmean, dinvstd, dx,
                                                               rows, inner);
}

void layer_norm_backward_params(const float* x, const float* dy, const double* mean, const double* invstd,
                                double* partial, float* dscale, float* dbias, int64_t rows, int64_t inner,
                                int64_t chunks, cudaStream_t stream) {
  if (inner <= 0) return;
  if (chunks > 0)
    params_partial_kernel<<<blocks_for(chunks * inner, kThreads), kThreads, 0, launch_stream(stream)>>>(x, dy, mean, invstd, partial,
                                                                                      rows, inner, chunks);
  params_final_kernel<<<blocks_for(inner, kThreads), kThreads, 0, launch_stream(stream)>>>(partial, dscale, dbias, inner, chunks);
}

}  // inline namespace movement
}  // namespace d5::cuda
