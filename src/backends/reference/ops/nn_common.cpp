#include "nn_common.h"

#include <algorithm>
#include <numeric>

namespace d5::reference {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

// Visits one channel's im2col rows a segment at a time. A segment is the run of window positions
// along the last spatial axis that share their positions on the other axes, for one kernel tap.
// f(col_offset, image_offset, lo, hi, stride): positions [lo, hi) of the segment read the image
// at image_offset + (o - lo) * stride; the others lie in the padding. image_offset is -1 when an
// outer axis already lies in the padding (the whole segment reads zeros).
template <typename F> void for_each_segment(const Window& w, F&& f) {
  const size_t r = w.rank(), last = r - 1;
  const int64_t positions = w.position_count(), taps = w.kernel_size();
  const int64_t run = w.positions[last], s = w.strides[last];
  if (positions == 0) return;
  std::vector<int64_t> image_stride(r, 1);
  for (size_t d = last; d-- > 0;) image_stride[d] = image_stride[d + 1] * w.image[d + 1];
  std::vector<int64_t> tap(r, 0), pos(r, 0);
  for (int64_t t = 0; t < taps; ++t) {
    // Position o reads the last axis at o * s + off: valid for lo <= o < hi.
    const int64_t off = tap[last] * w.dilations[last] - w.pads_begin[last];
    const int64_t hi = std::min(run, w.image[last] - off > 0 ? ceil_div(w.image[last] - off, s) : 0);
    const int64_t lo = std::min(hi, off >= 0 ? 0 : ceil_div(-off, s));
    std::fill(pos.begin(), pos.end(), 0);
    for (int64_t q = 0; q < positions / run; ++q) {
      int64_t image_offset = lo * s + off;
      for (size_t d = 0; d < last && image_offset >= 0; ++d) {
        const int64_t x = w.coord(d, pos[d], tap[d]);
        image_offset = x >= 0 && x < w.image[d] ? image_offset + x * image_stride[d] : -1;
      }
      f(t * positions + q * run, image_offset, lo, hi, s);
      for (size_t d = last; d-- > 0;) {
        if (++pos[d] < w.positions[d]) break;
        pos[d] = 0;
      }
    }
    for (size_t d = r; d-- > 0;) {
      if (++tap[d] < w.kernel[d]) break;
      tap[d] = 0;
    }
  }
}

}  // namespace

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

template <typename T> void im2col(const Window& w, int64_t channels, const T* image, T* col, int64_t ld) {
  const int64_t image_size = w.image_size(), positions = w.position_count(), rows = w.kernel_size() * positions;
  const int64_t run = w.positions.back();
  if (ld < 0) ld = positions;
#pragma omp parallel for if (worth_parallel(static_cast <double>(channels * rows)))
  for (int64_t c = 0; c < channels; ++c) {
    const T* img = image + c * image_size;
    T* cc = col + c * w.kernel_size() * ld;
    for_each_segment(w, [&](int64_t col_offset, int64_t image_offset, int64_t lo, int64_t hi, int64_t s) {
      // A segment never crosses a row: rows are whole multiples of the run length.
      T* dst = ld == positions ? cc + col_offset : cc + col_offset / positions * ld + col_offset % positions;
      if (image_offset < 0) {
        std::fill(dst, dst + run, T(0));
        return;
      }
      std::fill(dst, dst + lo, T(0));
      const T* src = img + image_offset - lo * s;  // src[o * s] is position o's pixel
      // Plain loops: segments are short, and std::copy's memmove call would cost more than the copy.
      if (s == 1) {
        for (int64_t o = lo; o < hi; ++o) dst[o] = src[o];
      } else {
        for (int64_t o = lo; o < hi; ++o) dst[o] = src[o * s];
      }
      std::fill(dst + hi, dst + run, T(0));
    });
  }
}

template <typename T> void col2im(const Window& w, int64_t channels, const T* col, T* image) {
  const int64_t image_size = w.image_size(), rows = w.kernel_size() * w.position_count();
#pragma omp parallel for if (worth_parallel(static_cast <double>(channels * rows)))
  for (int64_t c = 0; c < channels; ++c) {
    T* img = image + c * image_size;
    const T* cc = col + c * rows;
    std::fill(img, img + image_size, T(0));
    for_each_segment(w, [&](int64_t col_offset, int64_t image_offset, int64_t lo, int64_t hi, int64_t s) {
      if (image_offset < 0) return;
      const T* src = cc + col_offset;
      T* dst = img + image_offset;
      for (int64_t o = lo; o < hi; ++o) dst[(o - lo) * s] += src[o];
    });
  }
}

Shape nc_shape(int64_t n, int64_t c, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> dims = {n, c};
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  return Shape(dims);
}

bool zero_gradients_if_undefined(const Tensor& gy, std::span<Tensor> gx) {
  if (gy.defined()) return false;
  for (auto& g : gx)
    if (g.defined()) g.fill(0);
  return true;
}

template <typename T> void bias_gradient(const T* dy, int64_t n, int64_t m, int64_t p, T* db) {
  for (int64_t c = 0; c < m; ++c) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* row = dy + (i * m + c) * p;
      for (int64_t j = 0; j < p; ++j) acc += static_cast<double>(row[j]);
    }
    db[c] = static_cast<T>(acc);
  }
}

template <typename T> void sum_partials(const std::vector<T>& partials, int parts, int64_t size, T* out) {
  std::copy(partials.begin(), partials.begin() + size, out);
  for (int t = 1; t < parts; ++t)
    for (int64_t i = 0; i < size; ++i) out[i] += partials[static_cast<size_t>(t * size + i)];
}

bool worth_parallel(double work) {
  return work >= 1 << 20 && !omp_in_parallel() && omp_get_max_threads() > 1;
}

int item_threads(int64_t count, double work) {
  const int t = omp_get_max_threads();
  return count >= t && worth_parallel(work) ? t : 1;
}

#define D5_INSTANTIATE(T)                                                  \
  template void im2col<T>(const Window&, int64_t, const T*, T*, int64_t);  \
  template void col2im<T>(const Window&, int64_t, const T*, T*);           \
  template void bias_gradient<T>(const T*, int64_t, int64_t, int64_t, T*); \
  template void sum_partials<T>(const std::vector<T>&, int, int64_t, T*);
D5_INSTANTIATE(float)
D5_INSTANTIATE(double)
#undef D5_INSTANTIATE

void register_nn_ops(OpRegistry& r) {
  register_conv_ops(r);
  register_conv_transpose_ops(r);
  register_gemm_ops(r);
  register_matmul_ops(r);
  register_pool_ops(r);
}

}  // namespace d5::reference
