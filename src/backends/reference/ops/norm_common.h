#pragma once
// Pieces shared by the reference normalization, softmax, reduction and loss operators.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../ref_common.h"

namespace d5::reference {

// LRN lives in its own file but registers with the normalization family.
void register_lrn_op(OpRegistry& r);

// Product of s[begin, end).
int64_t dims_product(const Shape& s, size_t begin, size_t end);

// "none", "sum" or "mean" from the `reduction` attribute (losses).
enum class Reduction { None, Sum, Mean };
Reduction parse_reduction(const OpSpec& spec);

// An accumulated double stored as T. Integers saturate and NaN becomes 0, because converting an
// out-of-range floating-point value to an integer is undefined behaviour.
template <typename T>
T to_elem(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Softmax or log-softmax of x viewed as [outer, n, inner], along the middle axis. Each lane is
// computed in double with its maximum subtracted first, so large scores cannot overflow exp.
template <typename T>
void softmax_lanes(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double mx = -INFINITY;
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, static_cast<double>(x[base + k * inner]));
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        e[static_cast<size_t>(k)] = static_cast<double>(x[base + k * inner]) - mx;
        sum += std::exp(e[static_cast<size_t>(k)]);
      }
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < n; ++k) {
        const double v = e[static_cast<size_t>(k)];
        y[base + k * inner] = static_cast<T>(log ? v - log_sum : std::exp(v) / sum);
      }
    }
  }
}

// Backward of softmax_lanes given its output y and upstream g (any arithmetic type):
// softmax: gx = y * (g - sum(g * y)); log-softmax: gx = g - exp(y) * sum(g).
template <typename T, typename G>
void softmax_lanes_backward(const T* y, const G* g, T* gx, int64_t outer, int64_t n, int64_t inner,
                            bool log) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double dot = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = base + k * inner;
        dot += static_cast<double>(g[j]) * (log ? 1.0 : static_cast<double>(y[j]));
      }
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = base + k * inner;
        const double yj = static_cast<double>(y[j]), gj = static_cast<double>(g[j]);
        gx[j] = static_cast<T>(log ? gj - std::exp(yj) * dot : yj * (gj - dot));
      }
    }
  }
}

}  // namespace d5::reference
