// LRN on cuDNN (cross-channel), forward and backward. cuDNN's formula is ONNX's:
//   y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta
// (cuDNN divides alpha by the window width itself and places the window the same way), within
// cuDNN's limits on size, bias and beta. X [N, C, ...] is viewed as [N, C, inner, 1].
#include "cudnn_common.h"

namespace d5::cuda {

namespace {

class LrnOp final : public CudaOp {
 public:
  explicit LrnOp(const OpSpec& s) : CudaOp(s) {
    const Shape& x = s.inputs[0].shape;
    refuse_empty(x, "X");
    refuse_beyond_int(x, "X");
    const int64_t size = s.attrs.get_int("size");
    const double alpha = s.attrs.get_float("alpha", 1e-4);
    const double beta = s.attrs.get_float("beta", 0.75);
    const double bias = s.attrs.get_float("bias", 1.0);
    refuse_if(size < CUDNN_LRN_MIN_N || size > CUDNN_LRN_MAX_N, "size {}: cuDNN takes {} to {}", size, CUDNN_LRN_MIN_N,
              CUDNN_LRN_MAX_N);
    refuse_if(bias < CUDNN_LRN_MIN_K, "bias {}: cuDNN takes at least {}", bias, CUDNN_LRN_MIN_K);
    refuse_if(beta < CUDNN_LRN_MIN_BETA, "beta {}: cuDNN takes at least {}", beta, CUDNN_LRN_MIN_BETA);
    int64_t inner = 1;
    for (size_t d = 2; d < x.rank(); ++d) inner *= x[d];
    set_packed(x_, to_int({x[0], x[1], inner, 1}));
    check_cudnn(cudnnSetLRNDescriptor(lrn_.get(), static_cast<unsigned>(size), alpha, beta, bias),
                "cudnnSetLRNDescriptor");
  }

  std::string implementation() const override { return "cuda:cudnn:lrn"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    check_cudnn(cudnnLRNCrossChannelForward(cudnn_handle(), lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x_.get(),
                                            fptr(in[0]), &kZero, x_.get(), fptr(out[0])),
                "cudnnLRNCrossChannelForward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (!gy[0].defined()) return zero_gradients(gx);
    check_cudnn(cudnnLRNCrossChannelBackward(cudnn_handle(), lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x_.get(),
                                             fptr(out[0]), x_.get(), fptr(gy[0]), x_.get(), fptr(in[0]), &kZero,
                                             x_.get(), fptr(gx[0])),
                "cudnnLRNCrossChannelBackward");
  }

 private:
  CudnnTensor x_;  // X, Y and their gradients share the view
  CudnnLrn lrn_;
};

}  // namespace

std::unique_ptr<Operator> make_cudnn_lrn(const OpSpec& s) { return std::make_unique<LrnOp>(s); }

}  // namespace d5::cuda
