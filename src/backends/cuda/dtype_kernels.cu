// Kernels of dtype_kernels.h. Element-wise work is a grid-stride loop over 64-bit indices, one
// thread per element; scans and arg-extremes one thread per line in index order; InstanceNorm one
// block per row with a fixed-order shared-memory tree. No atomics in any sum, so runs agree bit
// for bit.
#include "kernel_grid.h"
#include "op_stream.h"
#include "dtype_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace d5::cuda {

namespace {

using grid::blocks_for;
using grid::kThreads;

#define D5_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__device__ int64_t offset_of(const StridedMap& m, int64_t i) {
  int64_t off = m.base;
  for (int k = m.rank - 1; k >= 0; --k) {
    off += (i % m.dims[k]) * m.strides[k];
    i /= m.dims[k];
  }
  return off;
}

// ---- element types ----------------------------------------------------------------------------

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

template <typename T> __device__ double to_d(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return static_cast<double>(__half2float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<double>(__bfloat162float(v));
  else
    return static_cast<double>(v);
}

// As the reference: halves round from the float nearest the double.
template <typename T> __device__ T from_d(double v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// The integer range a truncated float must fall in: [lowest, 2^digits).
template <typename T> struct IntRange;
template <> struct IntRange<int8_t> { static constexpr double lo = -128.0, hi = 128.0; };
template <> struct IntRange<int16_t> { static constexpr double lo = -32768.0, hi = 32768.0; };
template <> struct IntRange<int32_t> { static constexpr double lo = -2147483648.0, hi = 2147483648.0; };
template <> struct IntRange<int64_t> {
  static constexpr double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
};
template <> struct IntRange<uint8_t> { static constexpr double lo = 0.0, hi = 256.0; };

template <typename D, typename S> __device__ D convert(S v, bool& bad) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<S, bool>) {
    return from_d<D>(v ? 1.0 : 0.0);
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_float_v<S>)
      return to_d(v) != 0.0;
    else
      return v != 0;
  } else if constexpr (is_float_v<D>) {
    if constexpr (is_float_v<S> || is_half_v<D>)
      return from_d<D>(to_d(v));
    else
      return static_cast<D>(v);  // one rounding, also for int64 -> float
  } else if constexpr (is_float_v<S>) {
    const double t = trunc(to_d(v));
    if (!(t >= IntRange<D>::lo && t < IntRange<D>::hi)) {  // NaN fails too
      bad = true;
      return D(0);
    }
    return static_cast<D>(t);
  } else {
    return static_cast<D>(v);
  }
}

// Calls f.template operator()<T>() for the C++ type of `t`.
template <typename F> void dispatch_all(Elem t, F&& f) {
  switch (t) {
    case Elem::f32: f(float{}); break;
    case Elem::f64: f(double{}); break;
    case Elem::f16: f(__half{}); break;
    case Elem::bf16: f(__nv_bfloat16{}); break;
    case Elem::i8: f(int8_t{}); break;
    case Elem::i16: f(int16_t{}); break;
    case Elem::i32: f(int32_t{}); break;
    case Elem::i64: f(int64_t{}); break;
    case Elem::u8: f(uint8_t{}); break;
    case Elem::boolean: f(bool{}); break;
  }
}
// The numeric types (the reference's dispatch_numeric) and bool.
template <typename F> void dispatch_numeric(Elem t, F&& f) {
  switch (t) {
    case Elem::f32: f(float{}); break;
    case Elem::f64: f(double{}); break;
    case Elem::i8: f(int8_t{}); break;
    case Elem::i16: f(int16_t{}); break;
    case Elem::i32: f(int32_t{}); break;
    case Elem::i64: f(int64_t{}); break;
    case Elem::u8: f(uint8_t{}); break;
    case Elem::boolean: f(bool{}); break;
    default: break;  // refused on the host
  }
}

// ---- fill -------------------------------------------------------------------------------------

template <typename W> __global__ void fill_kernel(W* out, int64_t n, W v) {
  D5_GRID_LOOP(i, n) out[i] = v;
}

// ---- comparisons and logic --------------------------------------------------------------------

template <typename T> __device__ bool apply_logic(Logic op, T a, T b) {
  switch (op) {
    case Logic::eq: return a == b;
    case Logic::lt: return a < b;
    case Logic::gt: return a > b;
    case Logic::le: return a <= b;
    case Logic::ge: return a >= b;
    case Logic::and_: return a && b;
    case Logic::or_: return a || b;
    case Logic::xor_: return a != b;
  }
  return false;
}

template <typename T>
__global__ void compare_kernel(Logic op, const T* a, StridedMap am, const T* b, StridedMap bm, bool* y, int64_t n) {
  D5_GRID_LOOP(i, n) y[i] = apply_logic<T>(op, a[offset_of(am, i)], b[offset_of(bm, i)]);
}

__global__ void not_kernel(const bool* x, bool* y, int64_t n) {
  D5_GRID_LOOP(i, n) y[i] = !x[i];
}

// ---- cast -------------------------------------------------------------------------------------

template <typename S, typename D>
__global__ void cast_kernel(const S* x, D* y, int64_t n, unsigned long long* bad_pos) {
  D5_GRID_LOOP(i, n) {
    bool bad = false;
    y[i] = convert<D, S>(x[i], bad);
    if (bad) atomicMin(bad_pos, static_cast<unsigned long long>(i));
  }
}

// ---- arg extremes -----------------------------------------------------------------------------

// +1 when v is more extreme than best, 0 when tied, -1 otherwise; NaN is the most extreme.
template <typename T> __device__ int extreme_order(T v, T best, bool max) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool vn = isnan(v), bn = isnan(best);
    if (vn || bn) return static_cast<int>(vn) - static_cast<int>(bn);
  }
  if (v == best) return 0;
  return (max ? v > best : v < best) ? 1 : -1;
}

template <typename T>
__global__ void arg_extreme_kernel(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool max,
                                   bool last) {
  D5_GRID_LOOP(o, outer * inner) {
    const int64_t a = o / inner, b = o % inner;
    const T* line = x + a * n * inner + b;
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j) {
      const int order = extreme_order<T>(line[j * inner], line[best * inner], max);
      if (order > 0 || (order == 0 && last)) best = j;
    }
    y[o] = best;
  }
}

// ---- cumsum -----------------------------------------------------------------------------------

template <typename T>
__global__ void cumsum_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                              bool reverse) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  D5_GRID_LOOP(o, outer * inner) {
    const int64_t a = o / inner, b = o % inner;
    Acc sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = reverse ? n - 1 - k : k;
      const int64_t at = (a * n + j) * inner + b;
      const T v = x[at];  // read before the write: x and y may be the same buffer
      if (!exclusive) sum += static_cast<Acc>(v);
      y[at] = static_cast<T>(sum);
      if (exclusive) sum += static_cast<Acc>(v);
    }
  }
}

// ---- variadic ---------------------------------------------------------------------------------

__global__ void accumulate_kernel(const float* x, StridedMap m, double* acc, bool first, int64_t n) {
  D5_GRID_LOOP(i, n) {
    const double v = static_cast<double>(x[offset_of(m, i)]);
    acc[i] = first ? v : acc[i] + v;
  }
}

__global__ void divide_kernel(const double* acc, double divisor, float* y, int64_t n) {
  D5_GRID_LOOP(i, n) y[i] = static_cast<float>(acc[i] / divisor);
}

__global__ void scale_kernel(const float* x, double scale, float* y, int64_t n) {
  D5_GRID_LOOP(i, n) y[i] = static_cast<float>(static_cast<double>(x[i]) * scale);
}

template <typename T>
__global__ void select_kernel(bool max, int k, const T* x, StridedMap m, T* best, int32_t* winner, int64_t n) {
  D5_GRID_LOOP(i, n) {
    const T v = x[offset_of(m, i)];
    bool take = k == 0;
    if (!take) {
      const T b = best[i];
      take = max ? v > b : v < b;  // strict: the first of equals stays
      if constexpr (std::is_floating_point_v<T>) take = take || (isnan(v) && !isnan(b));
    }
    if (take) {
      best[i] = v;
      if (winner) winner[i] = k;
    }
  }
}

__global__ void route_kernel(const float* g, const int32_t* winner, int k, float* full, int64_t n) {
  D5_GRID_LOOP(i, n) full[i] = winner[i] == k ? g[i] : 0.0f;
}

// ---- InstanceNormalization --------------------------------------------------------------------

// Sum of v over the block's threads, in a fixed order; every thread gets the result.
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] += shared[threadIdx.x + w];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();  // before the next call overwrites shared
  return r;
}

__global__ void instance_norm_forward_kernel(const float* x, const float* scale, const float* bias, float* y,
                                             double* mean_out, double* invstd_out, int64_t channels, int64_t inner,
                                             double epsilon) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * inner;
  float* yr = y + r * inner;
  double s = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += static_cast<double>(xr[i]);
  const double mean = block_sum(s, shared) / static_cast<double>(inner);
  double q = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    const double d = static_cast<double>(xr[i]) - mean;
    q += d * d;
  }
  const double var = block_sum(q, shared) / static_cast<double>(inner);
  const double invstd = 1 / sqrt(var + epsilon);
  const int64_t c = r % channels;
  const double sc = static_cast<double>(scale[c]), bi = static_cast<double>(bias[c]);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
    yr[i] = static_cast<float>((static_cast<double>(xr[i]) - mean) * invstd * sc + bi);
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    invstd_out[r] = invstd;
  }
}

__global__ void instance_norm_backward_kernel(const float* x, const float* dy, const float* scale, const double* mean,
                                              const double* invstd, float* dx, double* sum_dy_out,
                                              double* sum_dyxh_out, int64_t channels, int64_t inner) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * inner;
  const float* gr = dy + r * inner;
  const double mu = mean[r], is = invstd[r];
  double s = 0, sx = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    const double g = static_cast<double>(gr[i]);
    s += g;
    sx += g * (static_cast<double>(xr[i]) - mu) * is;
  }
  const double sum_dy = block_sum(s, shared);
  const double sum_dyxh = block_sum(sx, shared);
  if (threadIdx.x == 0) {
    sum_dy_out[r] = sum_dy;
    sum_dyxh_out[r] = sum_dyxh;
  }
  if (!dx) return;
  const double sc = static_cast<double>(scale[r % channels]);
  const double m = static_cast<double>(inner);
  // With gh = dy * scale: invstd * (gh - (sum gh + xhat * sum gh xhat) / m), as the reference.
  const double sum_gh = sum_dy * sc, sum_ghxh = sum_dyxh * sc;
  float* dr = dx + r * inner;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    const double xh = (static_cast<double>(xr[i]) - mu) * is;
    const double gh = static_cast<double>(gr[i]) * sc;
    dr[i] = static_cast<float>(is * (gh - (sum_gh + xh * sum_ghxh) / m));
  }
}

__global__ void instance_norm_params_kernel(const double* sum_dy, const double* sum_dyxh, float* dscale, float* dbias,
                                            int64_t batch, int64_t channels) {
  D5_GRID_LOOP(c, channels) {
    double a = 0, b = 0;
    for (int64_t n = 0; n < batch; ++n) {
      a += sum_dyxh[n * channels + c];
      b += sum_dy[n * channels + c];
    }
    if (dscale) dscale[c] = static_cast<float>(a);
    if (dbias) dbias[c] = static_cast<float>(b);
  }
}

}  // namespace

void fill_words(void* out, int64_t n, uint64_t bits, int elem_size, cudaStream_t stream) {
  if (n <= 0) return;
  switch (elem_size) {
    case 1: fill_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<uint8_t*>(out), n, static_cast<uint8_t>(bits)); break;
    case 2: fill_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<uint16_t*>(out), n, static_cast<uint16_t>(bits)); break;
    case 4: fill_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<uint32_t*>(out), n, static_cast<uint32_t>(bits)); break;
    default: fill_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<uint64_t*>(out), n, bits); break;
  }
}

void compare(Logic op, Elem t, const void* a, const StridedMap& am, const void* b, const StridedMap& bm, bool* y,
             int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    compare_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(op, static_cast<const T*>(a), am,
                                                              static_cast<const T*>(b), bm, y, n);
  });
}

void logical_not(const bool* x, bool* y, int64_t n, cudaStream_t stream) {
  if (n > 0) not_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(x, y, n);
}

void cast(Elem from, Elem to, const void* x, void* y, int64_t n, unsigned long long* bad_pos, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_all(from, [&](auto s_tag) {
    using S = decltype(s_tag);
    dispatch_all(to, [&](auto d_tag) {
      using D = decltype(d_tag);
      cast_kernel<S, D><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<const S*>(x), static_cast<D*>(y), n,
                                                                bad_pos);
    });
  });
}

void arg_extreme(Elem t, bool max, bool last, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                 cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines <= 0) return;
  dispatch_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      arg_extreme_kernel<T><<<blocks_for(lines), kThreads, 0, launch_stream(stream)>>>(static_cast<const T*>(x), y, outer, n, inner,
                                                                        max, last);
  });
}

void cumsum(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
            cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines <= 0 || n <= 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    cumsum_kernel<T><<<blocks_for(lines), kThreads, 0, launch_stream(stream)>>>(static_cast<const T*>(x), static_cast<T*>(y), outer,
                                                                 n, inner, exclusive, reverse);
  };
  switch (t) {
    case Elem::f32: launch(float{}); break;
    case Elem::f64: launch(double{}); break;
    case Elem::i32: launch(int32_t{}); break;
    case Elem::i64: launch(int64_t{}); break;
    default: break;  // refused on the host
  }
}

void accumulate_f32(const float* x, const StridedMap& m, double* acc, bool first, int64_t n, cudaStream_t stream) {
  if (n > 0) accumulate_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(x, m, acc, first, n);
}

void divide_f32(const double* acc, double divisor, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) divide_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(acc, divisor, y, n);
}

void scale_f32(const float* x, double scale, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) scale_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(x, scale, y, n);
}

void select_step(Elem t, bool max, int k, const void* x, const StridedMap& m, void* best, int32_t* winner,
                 int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      select_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(max, k, static_cast<const T*>(x), m,
                                                               static_cast<T*>(best), winner, n);
  });
}

void route_f32(const float* g, const int32_t* winner, int k, float* full, int64_t n, cudaStream_t stream) {
  if (n > 0) route_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(g, winner, k, full, n);
}

void instance_norm_forward(const float* x, const float* scale, const float* bias, float* y, double* mean,
                           double* invstd, int64_t rows, int64_t channels, int64_t inner, double epsilon,
                           cudaStream_t stream) {
  if (rows <= 0 || inner <= 0) return;
  // A grid holds at most 2^31 - 1 blocks in x: far more rows than any N * C here.
  instance_norm_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, launch_stream(stream)>>>(x, scale, bias, y, mean, invstd,
                                                                                    channels, inner, epsilon);
}

void instance_norm_backward(const float* x, const float* dy, const float* scale, const double* mean,
                            const double* invstd, float* dx, double* sum_dy, double* sum_dyxh, int64_t rows,
                            int64_t channels, int64_t inner, cudaStream_t stream) {
  if (rows <= 0 || inner <= 0) return;
  instance_norm_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, launch_stream(stream)>>>(
      x, dy, scale, mean, invstd, dx, sum_dy, sum_dyxh, channels, inner);
}

void instance_norm_params(const double* sum_dy, const double* sum_dyxh, float* dscale, float* dbias, int64_t batch,
                          int64_t channels, cudaStream_t stream) {
  if (channels > 0)
    instance_norm_params_kernel<<<blocks_for(channels), kThreads, 0, launch_stream(stream)>>>(sum_dy, sum_dyxh, dscale, dbias,
                                                                              batch, channels);
}

}  // namespace d5::cuda
