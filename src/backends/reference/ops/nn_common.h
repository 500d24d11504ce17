#pragma once
// Shared by the convolution, pooling and matrix-multiply operators (the window rules themselves
// are deep500/spi/shape_rules.h): im2col / col2im, how independent items (images, groups,
// matrices) spread over the OpenMP threads, and the common frame of Conv and ConvTranspose.
#include <fmt/ranges.h>  // messages print attribute lists
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../ref_common.h"

namespace d5::reference {

// col has channels * kernel_size() rows and position_count() columns: row (c, t) holds, for every
// window position, the value of channel c under kernel tap t (0 in the padding). ld is the
// distance between rows (default: position_count()), so that the columns of several images can
// sit side by side in one wider matrix.
template <typename T> void im2col(const Window& w, int64_t channels, const T* image, T* col, int64_t ld = -1);
// The adjoint of im2col: overwrites image with the sum of the col entries that read each element.
template <typename T> void col2im(const Window& w, int64_t channels, const T* col, T* image);

// [N, C, spatial...]
Shape nc_shape(int64_t n, int64_t c, const std::vector<int64_t>& spatial);

// For backward(): when the output gradient is undefined (zero), fills every allocated input
// gradient with zeros and returns true.
bool zero_gradients_if_undefined(const Tensor& gy, std::span<Tensor> gx);

// db[m] = sum over images and positions of dy[n, m, p], accumulated in double.
template <typename T> void bias_gradient(const T* dy, int64_t n, int64_t m, int64_t p, T* db);

// Sum of `parts` equal-sized buffers (per-thread partial gradients) into out.
template <typename T> void sum_partials(const std::vector<T>& partials, int parts, int64_t size, T* out);

// Whether `work` (multiply-adds or element visits) pays for an OpenMP parallel region. Small
// problems stay on one thread: a region costs microseconds on an idle machine and far more on a
// busy one, where a barrier waits for a descheduled thread.
bool worth_parallel(double work);

// How many threads for_each_item spreads `count` items of `work` in total over: all of them when
// the work is worth it and there are at least as many items as threads (each item's GEMMs then
// run single-threaded), else 1 (the items run in order and each GEMM may use every thread).
int item_threads(int64_t count, double work);

// Calls f(item, thread) for item in [0, count), thread in [0, item_threads(count, work)). f must
// not throw: an exception cannot leave an OpenMP region. The static schedule gives every thread
// the same items on every call, so per-thread partial sums (weight gradients) are reduced in the
// same order and results are bitwise reproducible for a given thread count; items are equal-sized
// (one image and group each), so dynamic scheduling would buy no balance.
template <typename F> void for_each_item(int64_t count, double work, F&& f) {
  if (item_threads(count, work) > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) f(i, omp_get_thread_num());
  } else {
    for (int64_t i = 0; i < count; ++i) f(i, 0);
  }
}

// Scratch memory an operator keeps between calls, so that large im2col buffers are allocated
// and faulted in once rather than on every forward. Contents are not preserved across get().
class Workspace {
 public:
  template <typename T> T* get(int64_t count) {
    // At least one word: callers tell "no buffer" (a direct op) by a null pointer.
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    const size_t words = std::max<size_t>(1, (bytes + sizeof(double) - 1) / sizeof(double));
    if (words > words_) {
      buffer_ = std::make_unique_for_overwrite<double[]>(words);  // double-aligned for every T
      words_ = words;
    }
    return reinterpret_cast<T*>(buffer_.get());
  }

 private:
  std::unique_ptr<double[]> buffer_;
  size_t words_ = 0;
};

// What Conv and ConvTranspose share: inputs X, W and optional B, dtype dispatch, which inputs
// have gradients, the bias gradient, and the loop over (image, group) items with per-thread
// im2col buffers and per-thread partial weight gradients. Derived provides
//   run_forward<T>(x, w, b or nullptr, y)  and  run_backward<T>(x, w, dy, dx, dw)
// (dx / dw nullptr when not wanted), plus col_size(): the elements of one im2col matrix.
template <typename Derived> class ConvLikeOp : public ReferenceOp {
 public:
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      self().template run_forward<T>(in[0].data_as<T>(), in[1].data_as<T>(),
                                     d_.bias ? in[2].data_as<T>() : nullptr, out[0].data_as<T>());
    });
  }

  std::vector<bool> differentiable_inputs() const override { return d_.gradient_mask(spec_.inputs.size()); }

  // One im2col matrix per thread that forward runs on.
  int64_t workspace_bytes() const override {
    if (direct_) return 0;
    const int threads = item_threads(d_.n * d_.group, flops() / 2);
    return threads * static_cast<const Derived&>(*this).col_size() *
           static_cast<int64_t>(dtype_size(spec_.inputs[0].dtype));
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (zero_gradients_if_undefined(gy[0], gx)) return;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      auto grad = [&](size_t i) {
        return i < gx.size() && gx[i].defined() ? gx[i].template data_as<T>() : nullptr;
      };
      const T* dy = gy[0].data_as<T>();
      T* db = d_.bias ? grad(2) : nullptr;
      if (db) bias_gradient(dy, d_.n, d_.m, outputs_[0].numel() / std::max<int64_t>(1, d_.n * d_.m), db);
      if (grad(0) || grad(1))
        self().template run_backward<T>(in[0].data_as<T>(), in[1].data_as<T>(), dy, grad(0), grad(1));
    });
  }

 protected:
  // Y is [N, M, window positions] for Conv and [N, M, window image] for ConvTranspose.
  ConvLikeOp(const OpSpec& spec, const ConvDims& d, const Window& w, bool transposed)
      : ReferenceOp(
            spec, {TensorDesc{spec.inputs[0].dtype, nc_shape(d.n, d.m, transposed ? w.image : w.positions)}}),
        d_(d),
        w_(w) {}

  // Calls f(n, g, col, dw_part) for every image n and group g, spread over the threads: col is
  // this thread's im2col buffer (nullptr for a direct op), dw_part its zero-initialized partial
  // weight gradient (nullptr when dw is). The partials are summed into dw at the end.
  template <typename T, typename F> void for_each_image_group(T* dw, F&& f) {
    const int64_t items = d_.n * d_.group, col = self().col_size(), wsize = spec_.inputs[1].numel();
    const double work = flops() / 2;
    const int threads = item_threads(items, work);
    T* cols = direct_ ? nullptr : workspace_.get<T>(threads * col);
    std::vector<T> dw_parts(dw ? static_cast<size_t>(threads * wsize) : 0, T(0));
    for_each_item(items, work, [&](int64_t item, int thread) {
      f(item / d_.group, item % d_.group, cols ? cols + thread * col : nullptr,
        dw ? dw_parts.data() + thread * wsize : nullptr);
    });
    if (dw) sum_partials(dw_parts, threads, wsize, dw);
  }

  ConvDims d_;
  Window w_;
  bool direct_ = false;  // the GEMM reads or writes the image itself: no im2col needed
  Workspace workspace_;  // per-thread im2col matrices

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

// Product of a list of extents (1 for an empty list).
int64_t product(const std::vector<int64_t>& v);

// Registration of the operator files that make up register_nn_ops.
void register_conv_ops(OpRegistry& r);
void register_conv_transpose_ops(OpRegistry& r);
void register_gemm_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);

}  // namespace d5::reference
