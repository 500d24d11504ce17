// Softmax and LogSoftmax on cuDNN, forward and backward. X is viewed as [outer, n, inner] and
// normalized along n: cuDNN's channel mode over an NCHW view (N = outer, C = n, H = inner, W = 1).
// Opset 13+: n is the extent of `axis` (default -1); before opset 13, X is coerced to 2-D at
// `axis` (default 1), so n spans every trailing axis and inner is 1 (as the reference).
#include "cudnn_common.h"
#include "deep500/spi/shape_rules.h"

namespace d5::cuda {

namespace {

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= s[d];
  return p;
}

class SoftmaxOp final : public CudaOp {
 public:
  explicit SoftmaxOp(const OpSpec& s) : CudaOp(s) {
    log_ = s.type == "LogSoftmax";
    const Shape& x = s.inputs[0].shape;
    refuse_empty(x, "X");
    refuse_beyond_int(x, "X");
    const bool coerce_2d = s.opset < 13;
    const size_t axis = checked_axis(s, s.attrs.get_int("axis", coerce_2d ? 1 : -1), x.rank());
    const int64_t outer = product(x, 0, axis);
    const int64_t n = coerce_2d ? product(x, axis, x.rank()) : x[axis];
    const int64_t inner = coerce_2d ? 1 : product(x, axis + 1, x.rank());
    set_packed(x_, to_int({outer, n, inner, 1}));
  }

  std::string implementation() const override { return log_ ? "cuda:cudnn:log_softmax" : "cuda:cudnn:softmax"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    check_cudnn(cudnnSoftmaxForward(cudnn_handle(), algorithm(), CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, x_.get(),
                                    fptr(in[0]), &kZero, x_.get(), fptr(out[0])),
                "cudnnSoftmaxForward");
  }

  // From the output alone: softmax gx = y (g - sum g y); log-softmax gx = g - exp(y) sum g.
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) return zero_gradients(gx);
    check_cudnn(cudnnSoftmaxBackward(cudnn_handle(), algorithm(), CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, x_.get(),
                                     fptr(out[0]), x_.get(), fptr(gy[0]), &kZero, x_.get(), fptr(gx[0])),
                "cudnnSoftmaxBackward");
  }

 private:
  // ACCURATE subtracts each lane's maximum first, as the reference, so large scores cannot overflow.
  cudnnSoftmaxAlgorithm_t algorithm() const { return log_ ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE; }

  bool log_ = false;
  CudnnTensor x_;  // X, Y and their gradients share the view
};

}  // namespace

std::unique_ptr<Operator> make_cudnn_softmax(const OpSpec& s) { return std::make_unique<SoftmaxOp>(s); }

}  // namespace d5::cuda
