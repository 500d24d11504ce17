// BatchNormalization on cuDNN (spatial mode), forward and backward, in both ONNX modes:
// - inference (training_mode=0): normalizes with input_mean / input_var; its gradient treats
//   them as constants (as the reference does), computed by our kernels, since cuDNN's backward
//   always differentiates through batch statistics;
// - training (training_mode=1): batch statistics from cuDNN, which also saves them for backward;
//   the running mean / var outputs follow ONNX (biased batch variance), computed by our kernel
//   rather than cuDNN's running update (which uses the unbiased variance), and the gradients
//   reaching those outputs flow back into X through the batch statistics.
// X of any rank >= 2 is viewed as [N, C, inner, 1]; spatial=0 (opset < 9) as [N, C * inner, 1, 1]
// with one set of statistics per position, which is cuDNN's spatial mode over that view.
#include "batch_norm_kernels.h"
#include "cudnn_common.h"
#include "deep500/spi/sparse_output_gradients.h"

// See cudnn_common.h: the legacy API is deprecated in cuDNN 9 and used here on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5::cuda {

namespace {

class BatchNormOp final : public CudaOp, public SparseOutputGradients {
 public:
  explicit BatchNormOp(const OpSpec& s) : CudaOp(s) {
    const Shape& x = s.inputs[0].shape;
    refuse_empty(x, "X");
    refuse_beyond_int(x, "X");
    training_ = s.attrs.get_int("training_mode", 0) != 0;
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    momentum_ = s.attrs.get_float("momentum", 0.9);
    refuse_if(epsilon_ < CUDNN_BN_MIN_EPSILON, "epsilon {} is below cuDNN's minimum {}", epsilon_,
              CUDNN_BN_MIN_EPSILON);
    const bool spatial = s.attrs.get_int("spatial", 1) != 0;
    int64_t inner = 1;
    for (size_t d = 2; d < x.rank(); ++d) inner *= x[d];
    n_ = x[0];
    c_ = spatial ? x[1] : x[1] * inner;
    inner_ = spatial ? inner : 1;
    set_packed(x_, to_int({n_, c_, inner_, 1}));
    set_packed(params_, to_int({1, c_, 1, 1}));
    const auto channel_bytes = static_cast<size_t>(c_) * sizeof(float);
    if (training_) {
      saved_mean_ = DeviceBuffer(channel_bytes);
      saved_invstd_ = DeviceBuffer(channel_bytes);
      scale_sink_ = DeviceBuffer(channel_bytes);
      bias_sink_ = DeviceBuffer(channel_bytes);
    } else {
      invstd_ = DeviceBuffer(channel_bytes);
    }
  }

  std::string implementation() const override {
    return training_ ? "cuda:cudnn:batch_norm training" : "cuda:cudnn:batch_norm inference";
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const cudnnHandle_t h = cudnn_handle();
    if (!training_) {
      check_cudnn(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(),
                                                          fptr(in[0]), x_.get(), fptr(out[0]), params_.get(),
                                                          fptr(in[1]), fptr(in[2]), fptr(in[3]), fptr(in[4]), epsilon_),
                  "cudnnBatchNormalizationForwardInference");
      return;
    }
    // No running statistics from cuDNN (both null): its update uses the unbiased variance.
    check_cudnn(
        cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), fptr(in[0]),
                                               x_.get(), fptr(out[0]), params_.get(), fptr(in[1]), fptr(in[2]), 1.0,
                                               nullptr, nullptr, epsilon_, saved_mean_.get(), saved_invstd_.get()),
        "cudnnBatchNormalizationForwardTraining");
    kernels::bn_running_statistics(fptr(in[3]), fptr(in[4]), saved_mean_.as<float>(), saved_invstd_.as<float>(),
                                   epsilon_, momentum_, c_, fptr(out[1]), fptr(out[2]), nullptr);
    check_launch("bn_running_statistics");
    ran_forward_ = true;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (training_)
      backward_training(gy, in, gx);
    else
      backward_inference(gy, in, gx);
  }

 private:
  static float* grad(std::span<Tensor> gx, size_t i) {
    return i < gx.size() && gx[i].defined() ? fptr(gx[i]) : nullptr;
  }
  static const float* grad(std::span<const Tensor> gy, size_t i) {
    return i < gy.size() && gy[i].defined() ? fptr(gy[i]) : nullptr;
  }

  // With fixed statistics: dx = dy * scale * invstd, dscale = sum dy * xhat, dbias = sum dy.
  void backward_inference(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<Tensor> gx) {
    const float* dy = grad(gy, 0);
    if (!dy) return zero_gradients(gx);
    kernels::bn_inverse_std(fptr(in[4]), epsilon_, c_, invstd_.as<float>(), nullptr);
    check_launch("bn_inverse_std");
    if (float* dx = grad(gx, 0)) {
      kernels::bn_scaled_gradient(dy, fptr(in[1]), invstd_.as<float>(), n_, c_, inner_, dx, op_stream());
      check_launch("bn_scaled_gradient");
    }
    kernels::bn_parameter_gradients(fptr(in[0]), dy, fptr(in[3]), invstd_.as<float>(), n_, c_, inner_, grad(gx, 1),
                                    grad(gx, 2), op_stream());
    check_launch("bn_parameter_gradients");
  }

  // Through the batch statistics cuDNN saved in forward; then the running outputs' gradients,
  // which depend on the batch mean and biased variance with slope (1 - momentum).
  void backward_training(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<Tensor> gx) {
    D5_CHECK(ran_forward_, InvalidArgument, "{}: backward called before forward", spec_.label());
    const float* dy = grad(gy, 0);
    float* dx = grad(gx, 0);
    if (!dy) {
      zero_gradients(gx);
    } else if (dx) {
      float* dscale = grad(gx, 1) ? grad(gx, 1) : scale_sink_.as<float>();
      float* dbias = grad(gx, 2) ? grad(gx, 2) : bias_sink_.as<float>();
      check_cudnn(
          cudnnBatchNormalizationBackward(cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero,
                                          x_.get(), fptr(in[0]), x_.get(), dy, x_.get(), dx, params_.get(), fptr(in[1]),
                                          dscale, dbias, epsilon_, saved_mean_.get(), saved_invstd_.get()),
          "cudnnBatchNormalizationBackward");
    } else {
      kernels::bn_parameter_gradients(fptr(in[0]), dy, saved_mean_.as<float>(), saved_invstd_.as<float>(), n_, c_,
                                      inner_, grad(gx, 1), grad(gx, 2), op_stream());
      check_launch("bn_parameter_gradients");
    }
    const float* dmean = grad(gy, 1);
    const float* dvar = grad(gy, 2);
    if (!dx || (!dmean && !dvar)) return;
    const double m = static_cast<double>(n_ * inner_), slope = 1 - momentum_;
    kernels::bn_add_statistics_gradient(fptr(in[0]), saved_mean_.as<float>(), dmean, dvar, slope / m, 2 * slope / m, n_,
                                        c_, inner_, dx, nullptr);
    check_launch("bn_add_statistics_gradient");
  }

  bool training_ = false, ran_forward_ = false;
  double epsilon_ = 1e-5, momentum_ = 0.9;
  int64_t n_ = 0, c_ = 0, inner_ = 0;
  CudnnTensor x_, params_;
  DeviceBuffer saved_mean_, saved_invstd_;  // training: the batch statistics of the last forward
  DeviceBuffer scale_sink_, bias_sink_;     // training: parameter gradients nobody asked for
  DeviceBuffer invstd_;                     // inference: 1 / sqrt(input_var + epsilon), for backward
};

}  // namespace

std::unique_ptr<Operator> make_cudnn_batch_norm(const OpSpec& s) { return std::make_unique<BatchNormOp>(s); }

}  // namespace d5::cuda

#pragma GCC diagnostic pop
