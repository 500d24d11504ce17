#pragma once
// Host entry points of LayerNormalization's kernels (norm_kernels.cu). X is viewed as rows of
// `inner` elements (the normalized axes); scale and bias are given expanded to one value per
// position of a row. Plain C++17; launches on `stream`, never waits.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.
inline namespace movement {

// y = (x - mean) * invstd * scale + bias per row (bias may be null: 0), with the biased variance
// from two passes in double. Writes the statistics as f32 outputs and as doubles for backward.
void layer_norm_forward(const float* x, const float* scale, const float* bias, float* y, float* mean_out,
                        float* invstd_out, double* mean, double* invstd, int64_t rows, int64_t inner, double epsilon,
                        cudaStream_t stream);

// dx = invstd * (gh - (sum(gh) + xhat * sum(gh * xhat)) / m) + dmean / m + dvar * 2 (x - mean) / m
// with gh = dy * scale, dvar = dinvstd * -invstd^3 / 2; dy, dmean, dinvstd may be null (zero).
void layer_norm_backward_x(const float* x, const float* dy, const float* scale, const double* mean,
                           const double* invstd, const float* dmean, const float* dinvstd, float* dx, int64_t rows,
                           int64_t inner, cudaStream_t stream);

// dscale[q] = sum over rows of dy * xhat and dbias[q] = sum of dy, per row position q, in a
// fixed order: `chunks` partial sums (partial: 2 * chunks * inner doubles), then their sum.
void layer_norm_backward_params(const float* x, const float* dy, const double* mean, const double* invstd,
                                double* partial, float* dscale, float* dbias, int64_t rows, int64_t inner,
                                int64_t chunks, cudaStream_t stream);

}  // inline namespace movement
}  // namespace d5::cuda
