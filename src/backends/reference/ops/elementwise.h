#pragma once
// Pieces shared by the broadcasting element-wise families (binary arithmetic, variadic, logic):
// an N-input broadcast iterator, the legacy (opset < 7) broadcast rule, wrap-around integer
// arithmetic and checked conversions, so no kernel can hit signed overflow or an out-of-range cast.
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../ref_common.h"

namespace d5::reference {

// Visits every position of a broadcast output with the flat index of each of N inputs (NumPy
// rules: stride 0 on broadcast axes). The innermost axis runs as a tight loop.
template <size_t N> class BroadcastN {
 public:
  BroadcastN() = default;
  BroadcastN(const Shape& out, const std::array<Shape, N>& in) : dims_(out.dims()), numel_(out.numel()) {
    const size_t r = dims_.size();
    for (size_t k = 0; k < N; ++k) {
      strides_[k].assign(r, 0);
      const auto s = in[k].strides();
      const size_t off = r - in[k].rank();
      for (size_t i = 0; i < in[k].rank(); ++i) strides_[k][off + i] = in[k][i] == 1 ? 0 : s[i];
    }
  }

  // f(int64_t out_index, const std::array<int64_t, N>& in_index)
  template <typename F> void for_each(F&& f) const {
    std::array<int64_t, N> pos{};
    if (numel_ == 0) return;
    const size_t r = dims_.size();
    if (r == 0) {
      f(int64_t{0}, pos);
      return;
    }
    const int64_t inner = dims_[r - 1];
    std::array<int64_t, N> step{};
    for (size_t k = 0; k < N; ++k) step[k] = strides_[k][r - 1];
    std::vector<int64_t> idx(r, 0);
    for (int64_t o = 0; o < numel_; o += inner) {
      std::array<int64_t, N> p = pos;
      for (int64_t j = 0; j < inner; ++j) {
        f(o + j, p);
        for (size_t k = 0; k < N; ++k) p[k] += step[k];
      }
      for (size_t d = r - 1; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) pos[k] += strides_[k][d];
        if (++idx[d] < dims_[d]) break;
        for (size_t k = 0; k < N; ++k) pos[k] -= strides_[k][d] * dims_[d];
        idx[d] = 0;
      }
    }
  }

 private:
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::array<std::vector<int64_t>, N> strides_;
};

// Writes the gradient of an input from `full` (output shape): summed over broadcast axes into
// `grad` (the input's real shape), read through the input's effective shape `as`.
void reduce_grad(const Tensor& full, Tensor& grad, const Shape& as);

// Signed overflow is undefined behaviour; NumPy and ONNX Runtime wrap. Computing in an unsigned
// type at least as wide as `unsigned` (narrower ones would promote to int and could overflow
// there) and converting back wraps modulo 2^bits, which C++20 defines.
template <typename T> using WrapUnsigned =
    std::make_unsigned_t<std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, T>>;

template <typename T> T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(WrapUnsigned<T>(a) + WrapUnsigned<T>(b));
  else
    return a + b;
}
template <typename T> T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(WrapUnsigned<T>(a) - WrapUnsigned<T>(b));
  else
    return a - b;
}
template <typename T> T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(WrapUnsigned<T>(a) * WrapUnsigned<T>(b));
  else
    return a * b;
}

// double -> integer T, truncating toward zero (C and ONNX Runtime casts); NaN and values outside
// T's range are InvalidArgument instead of undefined behaviour.
template <typename T> T checked_integer(double v, const OpSpec& spec) {
  const double t = std::trunc(v);
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);  // exclusive: 2^31 for int32
  const double lo = std::is_signed_v<T> ? -hi : 0.0;
  D5_CHECK_ARG(t >= lo && t < hi, "{}: result {} does not fit in {}", spec.label(), v,
               to_string(dtype_of_v<T>));
  return static_cast<T>(t);
}

}  // namespace d5::reference
