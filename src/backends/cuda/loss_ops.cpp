// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and MSELoss (deep500's own operator) on
// the backend's own kernels (loss_kernels.cu). Like the reference, a target that is neither a
// class index nor ignore_index is an InvalidArgument: the class losses read the kernels' flag
// back after forward, which waits for the device.
#include "cuda_dims.h"
#include "loss_kernels.h"

namespace d5::cuda {
inline namespace movement {

namespace {

LossReduction reduction_of(const OpSpec& s) {
  const std::string r = s.attrs.get_string("reduction", "mean");
  return r == "none" ? LossReduction::None : r == "sum" ? LossReduction::Sum : LossReduction::Mean;
}

// Base of the two class losses: [n, c, d] layout, per-position scratch, the bad-target flag.
class ClassLossOp : public CudaOp {
 public:
  std::string implementation() const override { return "cuda"; }

 protected:
  explicit ClassLossOp(const OpSpec& s) : CudaOp(s), reduction_(reduction_of(s)) {
    refuse_if(s.inputs[0].dtype != DType::f32, "this cuda loss computes in f32 only; input 0 is {}",
              to_string(s.inputs[0].dtype));
    refuse_if(s.has_input(2) && s.inputs[2].dtype != DType::f32, "weights must be f32, got {}",
              to_string(s.inputs[2].dtype));
    const Shape& x = s.inputs[0].shape;
    t_.n = x[0];
    t_.c = x[1];
    for (size_t k = 2; k < x.rank(); ++k) t_.d *= x[k];
    t_.is64 = s.inputs[1].dtype == DType::i64;
    t_.has_ignore = s.attrs.has("ignore_index");
    if (t_.has_ignore) t_.ignore = s.attrs.get_int("ignore_index");
    const auto positions = static_cast<size_t>(t_.n * t_.d);
    loss_ = DeviceBuffer(positions * sizeof(double));
    weight_ = DeviceBuffer(positions * sizeof(double));
    total_w_ = DeviceBuffer(sizeof(double));
  }

  Targets targets(std::span<const Tensor> in) const {
    Targets t = t_;
    t.labels = in[1].data();
    t.weights = spec_.has_input(2) && in.size() > 2 ? fptr(in[2]) : nullptr;
    return t;
  }

  // The loss output from log-probabilities logp; throws for a bad target, as the reference does.
  void loss_from(const float* logp, std::span<const Tensor> in, Tensor& out) {
    const Targets t = targets(in);
    nll_positions(logp, t, loss_.as<double>(), weight_.as<double>(), flag_.reset(), nullptr);
    check_launch("nll_positions");
    finish_loss(loss_.as<double>(), weight_.as<double>(), t.n * t.d, reduction_, fptr(out), total_w_.as<double>(),
                nullptr);
    check_launch("finish_loss");
    check_on_host([this, t] {
      if (const auto bad = flag_.read())
        D5_THROW(InvalidArgument, "{}: target {} at position {} is not a class index in [0, {}){}", spec_.label(),
                 read_index(t.labels, t.is64, *bad), *bad, t.c, t.has_ignore ? " nor ignore_index" : "");
    });
  }

  LossReduction reduction_;
  Targets t_;
  DeviceBuffer loss_, weight_, total_w_;
  FirstBad flag_;
};

class NllLossOp : public ClassLossOp {
 public:
  explicit NllLossOp(const OpSpec& s) : ClassLossOp(s) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    loss_from(fptr(in[0]), in, out[0]);
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined() || gx[0].numel() == 0) return;
    nll_backward(gy[0].defined() ? fptr(gy[0]) : nullptr, targets(in), total_w_.as<double>(), reduction_,
                 fptr(gx[0]), op_stream());
    check_launch("nll_backward");
  }
};

// Outputs the loss and log_prob (the scores' shape).
class SoftmaxCrossEntropyOp : public ClassLossOp {
 public:
  explicit SoftmaxCrossEntropyOp(const OpSpec& s) : ClassLossOp(s) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    log_softmax_lanes(fptr(in[0]), fptr(out[1]), t_.n, t_.c, t_.d, nullptr);
    check_launch("log_softmax_lanes");
    loss_from(fptr(out[1]), in, out[0]);
  }

  // d loss / d logp plus log_prob's own upstream gradient, through log-softmax's backward.
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (!gx[0].defined() || gx[0].numel() == 0) return;
    const float* g_loss = gy[0].defined() ? fptr(gy[0]) : nullptr;
    const float* g_logp = gy.size() > 1 && gy[1].defined() ? fptr(gy[1]) : nullptr;
    softmax_xent_backward(fptr(out[1]), g_loss, g_logp, targets(in), total_w_.as<double>(), reduction_,
                          fptr(gx[0]), nullptr);
    check_launch("softmax_xent_backward");
  }
};

class MseLossOp : public CudaOp {
 public:
  explicit MseLossOp(const OpSpec& s) : CudaOp(s), reduction_(reduction_of(s)) {}

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    mse_forward(fptr(in[0]), fptr(in[1]), in[0].numel(), reduction_, fptr(out[0]), nullptr);
    check_launch("mse_forward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    const auto target = [&](size_t k) { return k < gx.size() && gx[k].defined() ? fptr(gx[k]) : nullptr; };
    mse_backward(fptr(in[0]), fptr(in[1]), gy[0].defined() ? fptr(gy[0]) : nullptr, in[0].numel(), reduction_,
                 target(0), target(1), op_stream());
    check_launch("mse_backward");
  }

 private:
  LossReduction reduction_;
};

template <typename Op>
std::unique_ptr<Operator> make(const OpSpec& s) {
  return std::make_unique<Op>(s);
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  const std::string class_notes =
      "f32 scores, int64/int32 targets, optional f32 weights, ignore_index; sums in double; a bad target "
      "waits for the device to report it";
  add_op(r, "NegativeLogLikelihoodLoss", make<NllLossOp>,
         {.backward = true, .any_dtype = true, .notes = class_notes});
  add_op(r, "SoftmaxCrossEntropyLoss", make<SoftmaxCrossEntropyOp>,
         {.backward = true, .any_dtype = true, .notes = class_notes});
  add_op(r, "MSELoss", make<MseLossOp>, {.backward = true, .notes = "f32; sums in double"});
}

}  // inline namespace movement
}  // namespace d5::cuda
