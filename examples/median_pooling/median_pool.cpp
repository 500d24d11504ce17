// Median pooling (the custom operator of the deep500 paper, Listings 3-5): each output element is
// the median of a KERNEL_SIZE x KERNEL_SIZE window of an NCHW input, windows STRIDE apart, no
// padding. Both are compile definitions: compile_custom_op(..., {{"KERNEL_SIZE", "3"},
// {"STRIDE", "1"}}) builds a library specialised for them.
//
// For an even window the median is the lower middle element, so it is always one of the window's
// elements and the gradient has a single destination: d out / d in is 1 at the median element and
// 0 elsewhere. When several elements equal the median value, the first in row-major window order
// receives the gradient.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "deep500/op/custom_op.h"

#ifndef KERNEL_SIZE
#error "define KERNEL_SIZE (window height and width), e.g. {\"KERNEL_SIZE\", \"3\"}"
#endif
#ifndef STRIDE
#error "define STRIDE (distance between windows), e.g. {\"STRIDE\", \"1\"}"
#endif
static_assert(KERNEL_SIZE >= 1 && STRIDE >= 1, "KERNEL_SIZE and STRIDE must be positive");

namespace {

constexpr int64_t kKernel = KERNEL_SIZE;
constexpr int64_t kStride = STRIDE;

class MedianPool : public d5::CustomOperator {
 public:
  MedianPool(std::span<const d5_tensor_desc> inputs, std::span<const d5_tensor_desc> outputs)
      : CustomOperator(inputs, outputs) {
    using d5::custom::require;
    using d5::custom::to_string;
    require(inputs.size() == 1 && outputs.size() == 1, "MedianPool takes one input and produces one output");
    const d5_tensor_desc& x = inputs[0];
    require(x.rank == 4, "MedianPool: input must be NCHW (rank 4), got " + to_string(x));
    require(x.dtype == D5_DTYPE_F32 || x.dtype == D5_DTYPE_F64,
            "MedianPool: input must be f32 or f64, got " + to_string(x));
    require(x.dims[2] >= kKernel && x.dims[3] >= kKernel,
            "MedianPool: input " + to_string(x) + " is smaller than the " + std::to_string(kKernel) + "x" +
                std::to_string(kKernel) + " window");
    d5_tensor_desc y = x;
    y.dims[2] = (x.dims[2] - kKernel) / kStride + 1;
    y.dims[3] = (x.dims[3] - kKernel) / kStride + 1;
    const d5_tensor_desc& o = outputs[0];
    bool same = o.dtype == y.dtype && o.rank == 4;
    for (int i = 0; same && i < 4; ++i) same = o.dims[i] == y.dims[i];
    require(same, "MedianPool: output must be " + to_string(y) + ", got " + to_string(o));
  }

  void forward(std::span<const d5_tensor> inputs, std::span<d5_tensor> outputs) override {
    if (inputs[0].desc.dtype == D5_DTYPE_F32) run_forward<float>(inputs[0], outputs[0]);
    else run_forward<double>(inputs[0], outputs[0]);
  }

  // Recomputes where each median came from out of the forward input rather than keeping state
  // from forward(), so backward is right even after other forwards of this instance.
  void backward(std::span<const d5_tensor> grad_outputs, std::span<const d5_tensor> fwd_inputs,
                std::span<const d5_tensor>, std::span<d5_tensor> grad_inputs) override {
    if (!grad_inputs[0].data) return;  // the input's gradient was not requested
    if (fwd_inputs[0].desc.dtype == D5_DTYPE_F32)
      run_backward<float>(grad_outputs[0], fwd_inputs[0], grad_inputs[0]);
    else run_backward<double>(grad_outputs[0], fwd_inputs[0], grad_inputs[0]);
  }

 private:
  // Calls f(n, c, oh, ow, flat input index of the window's median) for every output element.
  template <typename T, typename F>
  void for_each_median(const d5::custom::TensorView<const T>& x, F&& f) const {
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t oh = (h - kKernel) / kStride + 1, ow = (w - kKernel) / kStride + 1;
    // NaN sorts after every number: a strict weak order even with NaN inputs.
    auto less = [](T a, T b) { return std::isnan(b) ? !std::isnan(a) : a < b; };
    std::vector<T> window(static_cast<size_t>(kKernel * kKernel));
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ic = 0; ic < c; ++ic) {
        const int64_t plane = (in * c + ic) * h * w;
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t top = y * kStride, left = xo * kStride;
            for (int64_t i = 0; i < kKernel; ++i)
              for (int64_t j = 0; j < kKernel; ++j)
                window[static_cast<size_t>(i * kKernel + j)] = x[plane + (top + i) * w + left + j];
            const auto mid = window.begin() + (kKernel * kKernel - 1) / 2;
            std::nth_element(window.begin(), mid, window.end(), less);
            const T m = *mid;
            // The first element (row-major in the window) equal to the median value.
            int64_t at = -1;
            for (int64_t i = 0; i < kKernel && at < 0; ++i)
              for (int64_t j = 0; j < kKernel && at < 0; ++j) {
                const int64_t k = plane + (top + i) * w + left + j;
                if (x[k] == m || (std::isnan(m) && std::isnan(x[k]))) at = k;
              }
            f(in, ic, y, xo, at);
          }
      }
  }

  template <typename T>
  void run_forward(const d5_tensor& in, d5_tensor& out) const {
    const auto x = d5::custom::view<T>(in);
    auto yv = d5::custom::view<T>(out);
    for_each_median<T>(
        x, [&](int64_t n, int64_t c, int64_t y, int64_t xo, int64_t at) { yv(n, c, y, xo) = x[at]; });
  }

  template <typename T>
  void run_backward(const d5_tensor& grad_out, const d5_tensor& in, d5_tensor& grad_in) const {
    const auto x = d5::custom::view<T>(in);
    const auto gy = d5::custom::view<T>(grad_out);
    auto gx = d5::custom::view<T>(grad_in);
    std::fill(gx.data(), gx.data() + gx.numel(), T(0));
    // Overlapping windows (STRIDE < KERNEL_SIZE) can share a median element: accumulate.
    for_each_median<T>(
        x, [&](int64_t n, int64_t c, int64_t y, int64_t xo, int64_t at) { gx[at] += gy(n, c, y, xo); });
  }
};

}  // namespace

D5_REGISTER_OP(MedianPool);
