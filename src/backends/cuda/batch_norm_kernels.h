#pragma once
// Kernels of BatchNormalization (batch_norm_kernels.cu) for what cuDNN's batch norm calls do not
// compute: ONNX's running statistics (the biased batch variance), the gradient that reaches X
// through them, and inference mode's backward (fixed statistics). X is viewed as [n, c, inner]
// with per-channel statistics. Plain C++17 so that nvcc never sees d5's headers. Every launch is
// on `s`; null pointers mark outputs nobody asked for.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace d5::cuda::kernels {

// invstd[k] = 1 / sqrt(var[k] + epsilon).
void bn_inverse_std(const float* var, double epsilon, int64_t c, float* invstd, cudaStream_t s);

// ONNX's training-mode outputs from the batch statistics cuDNN saved (mean, 1 / sqrt(var + eps)):
//   out_mean = in_mean * momentum + mean * (1 - momentum)
//   out_var  = in_var * momentum + var * (1 - momentum)   (var biased, recovered from invstd)
void bn_running_statistics(const float* in_mean, const float* in_var, const float* mean, const float* invstd,
                           double epsilon, double momentum, int64_t c, float* out_mean, float* out_var, cudaStream_t s);

// dscale[k] = sum of dy * (x - mean[k]) * invstd[k] and dbias[k] = sum of dy over channel k,
// accumulated in double.
void bn_parameter_gradients(const float* x, const float* dy, const float* mean, const float* invstd, int64_t n,
                            int64_t c, int64_t inner, float* dscale, float* dbias, cudaStream_t s);

// dx = dy * scale[k] * invstd[k]: the gradient through fixed statistics.
void bn_scaled_gradient(const float* dy, const float* scale, const float* invstd, int64_t n, int64_t c, int64_t inner,
                        float* dx, cudaStream_t s);

// dx += mean_factor * dmean[k] + var_factor * dvar[k] * (x - mean[k]): the gradient reaching x
// through the batch mean and biased variance (dmean / dvar may be null).
void bn_add_statistics_gradient(const float* x, const float* mean, const float* dmean, const float* dvar,
                                double mean_factor, double var_factor, int64_t n, int64_t c, int64_t inner, float* dx,
                                cudaStream_t s);

}  // namespace d5::cuda::kernels
