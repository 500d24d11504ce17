// ConvTranspose: the adjoint of Conv with respect to its input. Every input pixel scatters its
// weighted kernel into the output: Y[o * stride - pad + t * dilation] += X[o] * W[t]. Per image
// and group that is one GEMM and a col2im:
//   col (M/group * kernel x P_in) = W[g]^T * X[n, g],   Y[n, g] = col2im(col),
// with the window sliding over Y (the image) and one position per input pixel.
#include "../gemm_kernel.h"
#include "nn_common.h"

namespace d5::reference {

namespace {

class ConvTransposeOp : public ConvLikeOp<ConvTransposeOp> {
 public:
  ConvTransposeOp(const OpSpec& spec, const ConvDims& d, const Window& w) : ConvLikeOp(spec, d, w, true) {
    // Unit kernel and strides, no padding: each input pixel lands on the output pixel of the same
    // index, so the GEMM writes the output directly.
    direct_ = w_.image == w_.positions;
    for (size_t i = 0; i < w_.rank(); ++i)
      direct_ = direct_ && w_.kernel[i] == 1 && w_.strides[i] == 1 && w_.pads_begin[i] == 0;
  }

  double flops() const override { return conv_flops(d_, w_, true); }

 private:
  friend class ConvLikeOp<ConvTransposeOp>;

  // The col rows of one group: output channels per group times kernel taps.
  int64_t rows() const { return d_.m / d_.group * w_.kernel_size(); }
  int64_t col_size() const { return rows() * w_.position_count(); }

  template <typename T> void run_forward(const T* x, const T* wt, const T* b, T* y) {
    const int64_t cg = d_.c / d_.group, mg = d_.m / d_.group, K = rows();
    const int64_t P = w_.position_count(), image = w_.image_size();
    for_each_image_group<T>(nullptr, [&](int64_t n, int64_t g, T* buf, T*) {
      T* yi = y + (n * d_.m + g * mg) * image;
      gemm<T>(K, P, cg, T(1), row_major(wt + g * cg * K, K).t(), row_major(x + (n * d_.c + g * cg) * P, P),
              T(0), row_major(buf ? buf : yi, P));
      if (buf) col2im(w_, mg, buf, yi);
      if (b)
        for (int64_t m = 0; m < mg; ++m)
          for (int64_t i = 0; i < image; ++i) yi[m * image + i] += b[g * mg + m];
    });
  }

  template <typename T> void run_backward(const T* x, const T* wt, const T* dy, T* dx, T* dw) {
    const int64_t cg = d_.c / d_.group, mg = d_.m / d_.group, K = rows();
    const int64_t P = w_.position_count(), image = w_.image_size();
    for_each_image_group<T>(dw, [&](int64_t n, int64_t g, T* buf, T* dw_part) {
      // dcol = im2col(dY): the gradient each input pixel's kernel sees.
      const T* dcol = dy + (n * d_.m + g * mg) * image;
      if (buf) {
        im2col(w_, mg, dcol, buf);
        dcol = buf;
      }
      if (dx)  // dX[n, g] = W[g] dcol
        gemm<T>(cg, P, K, T(1), row_major(wt + g * cg * K, K), row_major(dcol, P), T(0),
                row_major(dx + (n * d_.c + g * cg) * P, P));
      if (dw_part)  // dW[g] += X[n, g] dcol^T
        gemm<T>(cg, K, P, T(1), row_major(x + (n * d_.c + g * cg) * P, P), row_major(dcol, P).t(), T(1),
                row_major(dw_part + g * cg * K, K));
    });
  }
};

}  // namespace

void register_conv_transpose_ops(OpRegistry& r) {
  add_op(r, "ConvTranspose", true, [](const OpSpec& s) -> OpCreateResult {
    const ConvDims d = conv_dims(s, true);
    const Window w = transposed_window(s, d);
    return std::make_unique<ConvTransposeOp>(s, d, w);
  });
}

}  // namespace d5::reference
