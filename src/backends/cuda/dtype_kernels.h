#pragma once
// Host entry points of the kernels behind Constant / ConstantOfShape (fill), the comparisons and
// logical operators, Cast, ArgMax / ArgMin, CumSum, the variadic Sum / Mean / Max / Min and
// InstanceNormalization (dtype_kernels.cu). Plain C++17 so that nvcc never sees d5's C++20
// headers; every function launches on `stream` and returns without waiting.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "movement_kernels.h"

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.

// Element types the kernels take (bool: one byte holding 0 or 1).
enum class Elem : int { f32, f64, f16, bf16, i8, i16, i32, i64, u8, boolean };

// out[i] = the `elem_size`-byte word `bits` (1, 2, 4 or 8 bytes), i < n.
void fill_words(void* out, int64_t n, uint64_t bits, int elem_size, cudaStream_t stream);

enum class Logic : int { eq, lt, gt, le, ge, and_, or_, xor_ };

// y[i] = a[am(i)] op b[bm(i)] for i < n, in the inputs' type `t` (bool for and/or/xor).
void compare(Logic op, Elem t, const void* a, const StridedMap& am, const void* b, const StridedMap& bm, bool* y,
             int64_t n, cudaStream_t stream);
void logical_not(const bool* x, bool* y, int64_t n, cudaStream_t stream);

// y[i] = x[i] converted from `from` to `to` with the reference's rules (cast_dropout.cpp). A
// floating value that does not fit an integer type lowers *bad_pos (preset to all ones) to its
// position and converts to 0.
void cast(Elem from, Elem to, const void* x, void* y, int64_t n, unsigned long long* bad_pos, cudaStream_t stream);

// y[a, b] = index along the middle axis of x viewed as [outer, n, inner] of its largest (max) or
// smallest value: the first of equal ones, or the last when `last`; NaN is the most extreme.
// t: f32, f64, i8, i16, i32, i64 or u8.
void arg_extreme(Elem t, bool max, bool last, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                 cudaStream_t stream);

// The running sum along the middle axis of [outer, n, inner] (exclusive / reverse as ONNX):
// floating types accumulate in double, integers in int64. t: f32, f64, i32 or i64.
void cumsum(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
            cudaStream_t stream);

// Sum / Mean: acc[i] = (first ? 0 : acc[i]) + x[m(i)] in double; then y[i] = acc[i] / divisor.
void accumulate_f32(const float* x, const StridedMap& m, double* acc, bool first, int64_t n, cudaStream_t stream);
void divide_f32(const double* acc, double divisor, float* y, int64_t n, cudaStream_t stream);
// y[i] = (float)(x[i] * scale), computed in double.
void scale_f32(const float* x, double scale, float* y, int64_t n, cudaStream_t stream);

// Max / Min, input k of the list: best[i] = x[m(i)] where k == 0, or where it beats best[i]
// (strictly, or a NaN against a number); winner[i] (may be null) records k then.
// t: f32, f64, i8, i16, i32, i64 or u8.
void select_step(Elem t, bool max, int k, const void* x, const StridedMap& m, void* best, int32_t* winner,
                 int64_t n, cudaStream_t stream);
// full[i] = winner[i] == k ? g[i] : 0.
void route_f32(const float* g, const int32_t* winner, int k, float* full, int64_t n, cudaStream_t stream);

// InstanceNormalization over `rows` = N * C rows of `inner` elements (row r has channel r % C):
// statistics in double (two passes, biased variance), saved per row for backward.
void instance_norm_forward(const float* x, const float* scale, const float* bias, float* y, double* mean,
                           double* invstd, int64_t rows, int64_t channels, int64_t inner, double epsilon,
                           cudaStream_t stream);
// Per row: sum_dy[r] = sum of dy, sum_dyxh[r] = sum of dy * xhat; dx (skipped when null) =
// scale * invstd * (dy - (sum_dy + xhat * sum_dyxh) / inner).
void instance_norm_backward(const float* x, const float* dy, const float* scale, const double* mean,
                            const double* invstd, float* dx, double* sum_dy, double* sum_dyxh, int64_t rows,
                            int64_t channels, int64_t inner, cudaStream_t stream);
// dscale[c] = sum over n of sum_dyxh[n * C + c], dbias[c] the same of sum_dy (either may be null).
void instance_norm_params(const double* sum_dy, const double* sum_dyxh, float* dscale, float* dbias, int64_t batch,
                          int64_t channels, cudaStream_t stream);

}  // namespace d5::cuda
