// Dropout, forward and backward, f32. Inference (or ratio 0) passes X through with an all-true
// mask. In training the mask is drawn on the host from the reference's stream (the node's seed,
// "Dropout/<name>", one uniform per element in order) and copied to the device with each forward,
// so a seeded run drops the same elements here as on the reference; a device generator would be
// faster, but would drop other elements.
#include <vector>

#include "cuda_common.h"
#include "deep500/core/rng.h"
#include "elementwise_kernels.h"

namespace d5::cuda {

namespace {

class DropoutOp : public CudaOp {
 public:
  explicit DropoutOp(const OpSpec& s)
      : CudaOp(s),
        rng_(static_cast<uint64_t>(s.attrs.get_int("seed", kDefaultDropoutSeed)), "Dropout/" + s.name),
        n_(s.inputs[0].numel()),
        mask_(static_cast<size_t>(n_)),
        host_mask_(static_cast<size_t>(n_)) {
    refuse_if(s.inputs[0].dtype != DType::f32, "computes in f32 only; X is {}", to_string(s.inputs[0].dtype));
  }

  std::string implementation() const override { return "cuda:kernel(host mask)"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const double ratio = spec_.has_input(1) ? scalar(in, 1) : spec_.attrs.get_float("ratio", 0.5);
    D5_CHECK_ARG(ratio >= 0 && ratio <= 1, "{}: ratio {} is outside [0, 1]", spec_.label(), ratio);
    const bool training = spec_.has_input(2) && scalar(in, 2) != 0;
    scale_ = 1;
    if (training && ratio > 0) {
      // ratio 1 drops everything (as PyTorch does) instead of scaling by infinity.
      scale_ = ratio < 1 ? 1 / (1 - ratio) : 0;
      for (auto& m : host_mask_) m = rng_.uniform() >= ratio;
      check_cuda(cudaMemcpy(mask_.get(), host_mask_.data(), host_mask_.size(), cudaMemcpyHostToDevice),
                 "cudaMemcpy (Dropout mask)");
    } else if (n_ > 0) {
      check_cuda(cudaMemsetAsync(mask_.get(), 1, static_cast<size_t>(n_), op_stream()), "cudaMemsetAsync");
    }
    ran_ = true;
    kernels::masked_scale(fptr(in[0]), mask_.as<uint8_t>(), scale_, fptr(out[0]), n_, nullptr);
    check_launch("masked_scale");
    if (out.size() > 1) copy_device(out[1].data(), mask_.get(), static_cast<size_t>(n_));  // bool: one byte, 0 or 1
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    D5_CHECK_ARG(ran_, "{}: backward needs a forward call first", spec_.label());
    if (!gy[0].defined()) return zero_gradients(gx);
    kernels::masked_scale(fptr(gy[0]), mask_.as<uint8_t>(), scale_, fptr(gx[0]), n_, nullptr);
    check_launch("masked_scale");
  }

 private:
  // A scalar input (ratio, training_mode) on the host: its value when known at creation, else one
  // element copied from the device.
  double scalar(std::span<const Tensor> in, size_t i) const {
    if (const Tensor* known = spec_.value(i)) return known->get(0);
    return in[i].to(Device::cpu()).get(0);
  }

  RngStream rng_;
  int64_t n_;
  DeviceBuffer mask_;
  std::vector<uint8_t> host_mask_;
  double scale_ = 1;
  bool ran_ = false;
};

}  // namespace

void register_dropout_op(OpRegistry& r) {
  add_op(
      r, "Dropout", [](const OpSpec& s) { return std::make_unique<DropoutOp>(s); },
      {.backward = true,
       .any_dtype = true,
       .notes = "f32 data; the training mask is drawn on the host from the reference's stream and copied in"});
}

}  // namespace d5::cuda
