#pragma once
// Element-wise kernels of the CUDA backend (elementwise_kernels.cu): unary activations and math
// functions with their derivatives, broadcast binary arithmetic, and the sum over broadcast axes
// that turns a binary op's per-element gradient into its input's gradient. Plain C++17 so that
// nvcc never sees d5's headers.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda::kernels {

enum class Unary : int {
  Relu, LeakyRelu, Sigmoid, Tanh, Elu, Selu, Gelu, GeluTanh, Softplus, Erf, Mish, HardSigmoid, HardSwish,
  Sqrt, Exp, Log, Neg, Abs, Reciprocal, Clip
};

struct UnaryParams {
  float alpha = 0, beta = 0, gamma = 0;
  float lo = 0, hi = 0;  // Clip's bounds
};

// y = f(x) over n elements.
void unary_forward(Unary op, const UnaryParams& p, const float* x, float* y, int64_t n, cudaStream_t s);
// gx = gy * f'(x) (the derivative may read y = f(x)).
void unary_backward(Unary op, const UnaryParams& p, const float* x, const float* y, const float* gy, float* gx,
                    int64_t n, cudaStream_t s);

inline constexpr int kMaxRank = 8;

// An output of `rank` axes and the element strides of two inputs aligned to it (NumPy
// broadcasting: stride 0 along an axis the input repeats).
struct Broadcast {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};

enum class Binary : int { Add, Sub, Mul, Div, Pow, Max, Min };

void binary_forward(Binary op, const Broadcast& b, const float* a, const float* bv, float* y, int64_t n,
                    cudaStream_t s);
// The gradient contributions of every output element to `a` (ga_full) and `b` (gb_full), each of
// the output's size; either may be null when that input needs no gradient.
void binary_backward(Binary op, const Broadcast& b, const float* a, const float* bv, const float* y,
                     const float* gy, float* ga_full, float* gb_full, int64_t n, cudaStream_t s);

// y[i] = scale * a[broadcast offset of i] (a's strides in `b.a_strides`): Gemm's C term, and a
// plain scaling when the strides are the identity's.
void broadcast_scaled(const Broadcast& b, const float* a, float scale, float* y, int64_t n, cudaStream_t s);

// y[i] = mask[i] ? scale * x[i] (in double, rounded once) : 0 (Dropout's forward on the data, its backward on the gradient).
void masked_scale(const float* x, const uint8_t* mask, double scale, float* y, int64_t n, cudaStream_t s);

// dst[j] = sum of src over the axes that `dst_dims` has as 1 where `src_dims` does not (both of
// `rank` axes): one block per destination element, summed in a fixed order.
void sum_to_shape(const float* src, const int64_t* src_dims, float* dst, const int64_t* dst_dims, int rank,
                  cudaStream_t s);

}  // namespace d5::cuda::kernels
