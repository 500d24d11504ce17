// Element-wise kernels (elementwise_kernels.h). Grid-stride loops over 64-bit indices; one thread
// per element keeps every result independent of the launch shape, so runs agree bit for bit.
#include "kernel_grid.h"
#include "op_stream.h"
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "elementwise_kernels.h"

namespace d5::cuda::kernels {

namespace {

using grid::blocks_for;
using grid::kThreads;


__device__ float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__device__ float apply(Unary op, const UnaryParams& p, float x) {
  switch (op) {
    case Unary::Relu: return x > 0 ? x : 0.0f;
    case Unary::LeakyRelu: return x >= 0 ? x : p.alpha * x;
    case Unary::Sigmoid: return 1 / (1 + expf(-x));
    case Unary::Tanh: return tanhf(x);
    case Unary::Elu: return x >= 0 ? x : p.alpha * (expf(x) - 1);
    case Unary::Selu: return p.gamma * (x > 0 ? x : p.alpha * (expf(x) - 1));
    case Unary::Gelu: return 0.5f * x * (1 + erff(x * kInvSqrt2));
    case Unary::GeluTanh: return 0.5f * x * (1 + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    case Unary::Softplus: return softplus(x);
    case Unary::Erf: return erff(x);
    case Unary::Mish: return x * tanhf(softplus(x));
    case Unary::HardSigmoid: return fminf(fmaxf(p.alpha * x + p.beta, 0.0f), 1.0f);
    case Unary::HardSwish: return x * fminf(fmaxf(x / 6 + 0.5f, 0.0f), 1.0f);
    case Unary::Sqrt: return sqrtf(x);
    case Unary::Exp: return expf(x);
    case Unary::Log: return logf(x);
    case Unary::Neg: return -x;
    case Unary::Abs: return fabsf(x);
    case Unary::Reciprocal: return 1 / x;
    case Unary::Clip: return fminf(fmaxf(x, p.lo), p.hi);
  }
  return x;
}

// f'(x), given y = f(x); the conventions at kinks are the reference's (docs/validation.md).
__device__ float derivative(Unary op, const UnaryParams& p, float x, float y) {
  switch (op) {
    case Unary::Relu: return x > 0 ? 1.0f : 0.0f;
    case Unary::LeakyRelu: return x > 0 ? 1.0f : p.alpha;
    case Unary::Sigmoid: return y * (1 - y);
    case Unary::Tanh: return 1 - y * y;
    case Unary::Elu: return x > 0 ? 1.0f : y + p.alpha;
    case Unary::Selu: return p.gamma * (x > 0 ? 1.0f : p.alpha * expf(x));
    case Unary::Gelu: return 0.5f * (1 + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
    case Unary::GeluTanh: {
      const float t = tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x));
      return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715f * x * x);
    }
    case Unary::Softplus: return 1 / (1 + expf(-x));
    case Unary::Erf: return 1.1283791670955126f * expf(-x * x);  // 2/sqrt(pi) e^{-x^2}
    case Unary::Mish: {
      const float t = tanhf(softplus(x));
      return t + x * (1 - t * t) / (1 + expf(-x));
    }
    case Unary::HardSigmoid: {
      const float v = p.alpha * x + p.beta;
      return v > 0 && v < 1 ? p.alpha : 0.0f;
    }
    case Unary::HardSwish: return x <= -3 ? 0.0f : x >= 3 ? 1.0f : x / 3 + 0.5f;
    case Unary::Sqrt: return 0.5f / y;
    case Unary::Exp: return y;
    case Unary::Log: return 1 / x;
    case Unary::Neg: return -1.0f;
    case Unary::Abs: return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
    case Unary::Reciprocal: return -y * y;
    case Unary::Clip: return x > p.lo && x < p.hi ? 1.0f : 0.0f;
  }
  return 0;
}

// Whether f'(x) is computed from y = f(x): the others never read y.
__host__ __device__ constexpr bool derivative_reads_y(Unary op) {
  return op == Unary::Sigmoid || op == Unary::Tanh || op == Unary::Elu || op == Unary::Sqrt || op == Unary::Exp ||
         op == Unary::Reciprocal;
}

// One instantiation per function: the switch folds away, and a backward pass that does not need
// y does not read it (a third less memory traffic for Relu's).
template <Unary Op>
__global__ void unary_forward_kernel(UnaryParams p, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = apply(Op, p, x[i]);
}

template <Unary Op>
__global__ void unary_backward_kernel(UnaryParams p, const float* x, const float* y, const float* gy, float* gx,
                                      int64_t n) {
  constexpr bool kReadsY = derivative_reads_y(Op);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    gx[i] = gy[i] * derivative(Op, p, x[i], kReadsY ? y[i] : 0.0f);
}

// Runs `launch` with `op` as a compile-time constant.
template <typename Launch>
void with_unary(Unary op, Launch&& launch) {
  using U = Unary;
  switch (op) {
#define D5_UNARY_CASE(name) \
  case U::name: launch(std::integral_constant<U, U::name>{}); break;
    D5_UNARY_CASE(Relu) D5_UNARY_CASE(LeakyRelu) D5_UNARY_CASE(Sigmoid) D5_UNARY_CASE(Tanh) D5_UNARY_CASE(Elu)
    D5_UNARY_CASE(Selu) D5_UNARY_CASE(Gelu) D5_UNARY_CASE(GeluTanh) D5_UNARY_CASE(Softplus) D5_UNARY_CASE(Erf)
    D5_UNARY_CASE(Mish) D5_UNARY_CASE(HardSigmoid) D5_UNARY_CASE(HardSwish) D5_UNARY_CASE(Sqrt) D5_UNARY_CASE(Exp)
    D5_UNARY_CASE(Log) D5_UNARY_CASE(Neg) D5_UNARY_CASE(Abs) D5_UNARY_CASE(Reciprocal) D5_UNARY_CASE(Clip)
#undef D5_UNARY_CASE
  }
}

struct Offsets {
  int64_t a = 0, b = 0;
};

// How a binary kernel finds its operands' elements: both operands laid out as the output (no
// index arithmetic: residual Adds, gradients), or through the broadcast strides, in 32-bit
// arithmetic when every index fits (64-bit division costs tens of instructions per axis, which
// made a residual Add compute-bound).
enum class Indexing { dense, narrow, wide };

template <Indexing M>
__device__ Offsets offsets_of(const Broadcast& bc, int64_t i) {
  Offsets o;
  if constexpr (M == Indexing::dense) {
    o.a = o.b = i;
  } else if constexpr (M == Indexing::narrow) {
    auto r = static_cast<uint32_t>(i);
    uint32_t a = 0, b = 0;
    for (int k = bc.rank - 1; k >= 0; --k) {
      const auto d = static_cast<uint32_t>(bc.dims[k]);
      const uint32_t c = r % d;
      r /= d;
      a += c * static_cast<uint32_t>(bc.a_strides[k]);
      b += c * static_cast<uint32_t>(bc.b_strides[k]);
    }
    o.a = a;
    o.b = b;
  } else {
    for (int k = bc.rank - 1; k >= 0; --k) {
      const int64_t c = i % bc.dims[k];
      i /= bc.dims[k];
      o.a += c * bc.a_strides[k];
      o.b += c * bc.b_strides[k];
    }
  }
  return o;
}

__device__ float combine(Binary op, float a, float b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Pow: return powf(a, b);
    case Binary::Max: return fmaxf(a, b);
    case Binary::Min: return fminf(a, b);
  }
  return 0;
}

template <Indexing M>
__global__ void binary_forward_kernel(Binary op, Broadcast bc, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const Offsets o = offsets_of<M>(bc, i);
    y[i] = combine(op, a[o.a], b[o.b]);
  }
}

// The reference's gradients (src/backends/reference/ops/binary.cpp): Pow's d/da is 0 where b = 0
// and its d/db is 0 where a <= 0.
template <Indexing M>
__global__ void binary_backward_kernel(Binary op, Broadcast bc, const float* a, const float* b, const float* y,
                                       const float* gy, float* ga, float* gb, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const Offsets o = offsets_of<M>(bc, i);
    const float av = a[o.a], bv = b[o.b], g = gy[i];
    float da = 0, db = 0;
    switch (op) {
      case Binary::Add: da = g; db = g; break;
      case Binary::Sub: da = g; db = -g; break;
      case Binary::Mul: da = g * bv; db = g * av; break;
      case Binary::Div: da = g / bv; db = -g * av / (bv * bv); break;
      case Binary::Pow:
        da = bv == 0 ? 0.0f : g * bv * powf(av, bv - 1);
        db = av > 0 ? g * y[i] * logf(av) : 0.0f;
        break;
      case Binary::Max: da = av >= bv ? g : 0.0f; db = av >= bv ? 0.0f : g; break;
      case Binary::Min: da = av <= bv ? g : 0.0f; db = av <= bv ? 0.0f : g; break;
    }
    if (ga) ga[i] = da;
    if (gb) gb[i] = db;
  }
}

template <Indexing M>
__global__ void broadcast_scaled_kernel(Broadcast bc, const float* a, float scale, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = scale * a[offsets_of<M>(bc, i).a];
}

// The cheapest indexing that is right for `bc` over `n` output elements (`with_b`: whether the
// kernel reads the second operand). An operand is dense when its strides are the output's
// row-major ones on every axis longer than 1; an operand's offsets never exceed n, the output's
// size, since broadcast axes have stride 0.
Indexing indexing_of(const Broadcast& bc, int64_t n, bool with_b) {
  bool dense = true;
  int64_t stride = 1;
  for (int k = bc.rank - 1; k >= 0; --k) {
    if (bc.dims[k] != 1 && (bc.a_strides[k] != stride || (with_b && bc.b_strides[k] != stride))) dense = false;
    stride *= bc.dims[k];
  }
  if (dense) return Indexing::dense;
  return n <= INT32_MAX ? Indexing::narrow : Indexing::wide;
}

// Runs `launch` with the kernel instantiation for `bc`'s indexing.
template <typename Launch>
void with_indexing(const Broadcast& bc, int64_t n, bool with_b, Launch&& launch) {
  switch (indexing_of(bc, n, with_b)) {
    case Indexing::dense: launch(std::integral_constant<Indexing, Indexing::dense>{}); break;
    case Indexing::narrow: launch(std::integral_constant<Indexing, Indexing::narrow>{}); break;
    case Indexing::wide: launch(std::integral_constant<Indexing, Indexing::wide>{}); break;
  }
}

__global__ void masked_scale_kernel(const float* x, const uint8_t* mask, double scale, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = mask[i] ? (scale == 1.0 ? x[i] : static_cast<float>(static_cast<double>(x[i]) * scale)) : 0.0f;
}

struct SumShape {
  int rank = 0;
  int64_t src_dims[kMaxRank] = {};
  int64_t dst_dims[kMaxRank] = {};
};

// Block j sums every source element that maps to destination element j; threads take strided
// shares and a tree in shared memory adds them, in the same order on every run.
__global__ void sum_to_shape_kernel(SumShape sh, const float* src, float* dst, int64_t reduced) {
  __shared__ float partial[kThreads];
  const int64_t j = blockIdx.x;
  // The destination's multi-index fixes the kept axes; the reduced ones are enumerated.
  int64_t keep_index[kMaxRank];
  int64_t rest = j;
  for (int k = sh.rank - 1; k >= 0; --k) {
    keep_index[k] = rest % sh.dst_dims[k];
    rest /= sh.dst_dims[k];
  }
  float acc = 0;
  for (int64_t r = threadIdx.x; r < reduced; r += blockDim.x) {
    int64_t rr = r, offset = 0, stride = 1;
    for (int k = sh.rank - 1; k >= 0; --k) {
      int64_t c = keep_index[k];
      if (sh.dst_dims[k] == 1 && sh.src_dims[k] != 1) {
        c = rr % sh.src_dims[k];
        rr /= sh.src_dims[k];
      }
      offset += c * stride;
      stride *= sh.src_dims[k];
    }
    acc += src[offset];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) dst[j] = partial[0];
}

}  // namespace

void unary_forward(Unary op, const UnaryParams& p, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  with_unary(op, [&](auto u) { unary_forward_kernel<decltype(u)::value><<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(p, x, y, n); });
}

void unary_backward(Unary op, const UnaryParams& p, const float* x, const float* y, const float* gy, float* gx,
                    int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  with_unary(op, [&](auto u) {
    unary_backward_kernel<decltype(u)::value><<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(p, x, y, gy, gx, n);
  });
}

void binary_forward(Binary op, const Broadcast& b, const float* a, const float* bv, float* y, int64_t n,
                    cudaStream_t s) {
  if (n <= 0) return;
  with_indexing(b, n, true, [&](auto m) { binary_forward_kernel<decltype(m)::value><<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(op, b, a, bv, y, n); });
}

void binary_backward(Binary op, const Broadcast& b, const float* a, const float* bv, const float* y,
                     const float* gy, float* ga_full, float* gb_full, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  with_indexing(b, n, true, [&](auto m) {
    binary_backward_kernel<decltype(m)::value><<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(op, b, a, bv, y, gy, ga_full, gb_full, n);
  });
}

void broadcast_scaled(const Broadcast& b, const float* a, float scale, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  with_indexing(b, n, false, [&](auto m) { broadcast_scaled_kernel<decltype(m)::value><<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(b, a, scale, y, n); });
}

void masked_scale(const float* x, const uint8_t* mask, double scale, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) masked_scale_kernel<<<blocks_for(n), kThreads, 0, launch_stream(s)>>>(x, mask, scale, y, n);
}

void sum_to_shape(const float* src, const int64_t* src_dims, float* dst, const int64_t* dst_dims, int rank,
                  cudaStream_t s) {
  SumShape sh;
  sh.rank = rank;
  int64_t dst_n = 1, reduced = 1;
  for (int k = 0; k < rank; ++k) {
    sh.src_dims[k] = src_dims[k];
    sh.dst_dims[k] = dst_dims[k];
    dst_n *= dst_dims[k];
    if (dst_dims[k] == 1 && src_dims[k] != 1) reduced *= src_dims[k];
  }
  if (dst_n == 0) return;
  // A grid holds at most 2^31 - 1 blocks in x: far more than any destination here.
  sum_to_shape_kernel<<<static_cast<unsigned>(dst_n), kThreads, 0, launch_stream(s)>>>(sh, src, dst, reduced);
}

}  // namespace d5::cuda::kernels
