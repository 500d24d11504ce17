// InstanceNormalization on the backend's own kernels (dtype_kernels.cu): each (sample, channel)
// row of X [N, C, spatial...] normalized over its spatial positions with statistics in double,
// then scaled and shifted per channel; gradients for X, scale and B as the reference's
// (reference/ops/normalization.cpp), the per-channel sums in a fixed order.
#include "dtype_refusal.h"

namespace d5::cuda {

namespace {

class InstanceNormOp : public CudaOp {
 public:
  explicit InstanceNormOp(const OpSpec& s) : CudaOp(s) {
    const Shape& x = s.inputs[0].shape;
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    batch_ = x[0];
    channels_ = x[1];
    inner_ = 1;
    for (size_t k = 2; k < x.rank(); ++k) inner_ *= x[k];
    const auto rows = static_cast<size_t>(batch_ * channels_);
    for (DeviceBuffer* b : {&mean_, &invstd_, &sum_dy_, &sum_dyxh_}) *b = DeviceBuffer(rows * sizeof(double));
  }

  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    instance_norm_forward(fptr(in[0]), fptr(in[1]), fptr(in[2]), fptr(out[0]), mean_.as<double>(),
                          invstd_.as<double>(), batch_ * channels_, channels_, inner_, epsilon_, nullptr);
    check_launch("instance_norm_forward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined() || in[0].numel() == 0) return zero_gradients(gx);
    auto wanted = [&](size_t i) { return i < gx.size() && gx[i].defined() && gx[i].numel() > 0; };
    instance_norm_backward(fptr(in[0]), fptr(gy[0]), fptr(in[1]), mean_.as<double>(), invstd_.as<double>(),
                           wanted(0) ? fptr(gx[0]) : nullptr, sum_dy_.as<double>(), sum_dyxh_.as<double>(),
                           batch_ * channels_, channels_, inner_, nullptr);
    check_launch("instance_norm_backward");
    if (!wanted(1) && !wanted(2)) return;
    instance_norm_params(sum_dy_.as<double>(), sum_dyxh_.as<double>(), wanted(1) ? fptr(gx[1]) : nullptr,
                         wanted(2) ? fptr(gx[2]) : nullptr, batch_, channels_, nullptr);
    check_launch("instance_norm_params");
  }

 private:
  double epsilon_ = 1e-5;
  int64_t batch_ = 0, channels_ = 0, inner_ = 1;
  DeviceBuffer mean_, invstd_, sum_dy_, sum_dyxh_;  // per row, of the last forward
};

}  // namespace

void register_instance_norm_op(OpRegistry& r) {
  add_op(
      r, "InstanceNormalization", [](const OpSpec& s) { return std::make_unique<InstanceNormOp>(s); },
      {.backward = true, .notes = "f32; statistics and sums in double, one block per (sample, channel); own kernel"});
}

}  // namespace d5::cuda
