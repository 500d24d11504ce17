// BatchNormalization kernels (batch_norm_kernels.h). Per-channel sums run one block per channel
// with a fixed reduction tree, so results do not depend on timing; element-wise passes are
// grid-stride loops over 64-bit indices.
#include "kernel_grid.h"
#include "op_stream.h"
#include <cmath>

#include "batch_norm_kernels.h"

namespace d5::cuda::kernels {

namespace {

using grid::blocks_for;
using grid::kThreads;


__global__ void inverse_std_kernel(const float* var, double eps, int64_t c, float* invstd) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < c; k += int64_t{gridDim.x} * blockDim.x)
    invstd[k] = static_cast<float>(1.0 / sqrt(static_cast<double>(var[k]) + eps));
}

__global__ void running_statistics_kernel(const float* in_mean, const float* in_var, const float* mean,
                                          const float* invstd, double eps, double momentum, int64_t c, float* out_mean,
                                          float* out_var) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < c; k += int64_t{gridDim.x} * blockDim.x) {
    const double inv = invstd[k];
    // invstd = 1 / sqrt(var + eps): var comes back to within a few ulps of var + eps.
    const double var = fmax(1.0 / (inv * inv) - eps, 0.0);
    out_mean[k] = static_cast<float>(in_mean[k] * momentum + mean[k] * (1 - momentum));
    out_var[k] = static_cast<float>(in_var[k] * momentum + var * (1 - momentum));
  }
}

// One block per channel: the channel's elements are visited in a fixed order per thread and
// combined by a fixed tree.
__global__ void parameter_gradients_kernel(const float* x, const float* dy, const float* mean, const float* invstd,
                                           int64_t n, int64_t c, int64_t inner, float* dscale, float* dbias) {
  __shared__ double s_scale[kThreads];
  __shared__ double s_bias[kThreads];
  const int64_t k = blockIdx.x;
  const double m = mean[k], inv = invstd[k];
  double acc_scale = 0, acc_bias = 0;
  for (int64_t e = threadIdx.x; e < n * inner; e += blockDim.x) {
    const int64_t i = (e / inner * c + k) * inner + e % inner;
    const double g = dy[i];
    acc_scale += g * (static_cast<double>(x[i]) - m) * inv;
    acc_bias += g;
  }
  s_scale[threadIdx.x] = acc_scale;
  s_bias[threadIdx.x] = acc_bias;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      s_scale[threadIdx.x] += s_scale[threadIdx.x + half];
      s_bias[threadIdx.x] += s_bias[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (dscale) dscale[k] = static_cast<float>(s_scale[0]);
    if (dbias) dbias[k] = static_cast<float>(s_bias[0]);
  }
}

__global__ void scaled_gradient_kernel(const float* dy, const float* scale, const float* invstd, int64_t total,
                                       int64_t c, int64_t inner, float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i / inner % c;
    dx[i] = dy[i] * scale[k] * invstd[k];
  }
}

__global__ void add_statistics_gradient_kernel(const float* x, const float* mean, const float* dmean, const float* dvar,
                                               double mean_factor, double var_factor, int64_t total, int64_t c,
                                               int64_t inner, float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i / inner % c;
    double d = 0;
    if (dmean) d += mean_factor * dmean[k];
    if (dvar) d += var_factor * dvar[k] * (static_cast<double>(x[i]) - mean[k]);
    dx[i] = static_cast<float>(dx[i] + d);
  }
}

}  // namespace

void bn_inverse_std(const float* var, double epsilon, int64_t c, float* invstd, cudaStream_t s) {
  inverse_std_kernel<<<blocks_for(c), kThreads, 0, launch_stream(s)>>>(var, epsilon, c, invstd);
}

void bn_running_statistics(const float* in_mean, const float* in_var, const float* mean, const float* invstd,
                           double epsilon, double momentum, int64_t c, float* out_mean, float* out_var,
                           cudaStream_t s) {
  running_statistics_kernel<<<blocks_for(c), kThreads, 0, launch_stream(s)>>>(in_mean, in_var, mean, invstd, epsilon, momentum, c,
                                                               out_mean, out_var);
}

void bn_parameter_gradients(const float* x, const float* dy, const float* mean, const float* invstd, int64_t n,
                            int64_t c, int64_t inner, float* dscale, float* dbias, cudaStream_t s) {
  if (c == 0 || (!dscale && !dbias)) return;
  parameter_gradients_kernel<<<static_cast<unsigned>(c), kThreads, 0, launch_stream(s)>>>(x, dy, mean, invstd, n, c, inner, dscale,
                                                                           dbias);
}

void bn_scaled_gradient(const float* dy, const float* scale, const float* invstd, int64_t n, int64_t c, int64_t inner,
                        float* dx, cudaStream_t s) {
  const int64_t total = n * c * inner;
  scaled_gradient_kernel<<<blocks_for(total), kThreads, 0, launch_stream(s)>>>(dy, scale, invstd, total, c, inner, dx);
}

void bn_add_statistics_gradient(const float* x, const float* mean, const float* dmean, const float* dvar,
                                double mean_factor, double var_factor, int64_t n, int64_t c, int64_t inner, float* dx,
                                cudaStream_t s) {
  if (!dmean && !dvar) return;
  const int64_t total = n * c * inner;
  add_statistics_gradient_kernel<<<blocks_for(total), kThreads, 0, launch_stream(s)>>>(x, mean, dmean, dvar, mean_factor, var_factor,
                                                                        total, c, inner, dx);
}

}  // namespace d5::cuda::kernels
