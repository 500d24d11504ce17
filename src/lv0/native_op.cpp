#include "deep500/op/native_op.h"

#include <exception>

#include "deep500/spi/custom_op_checks.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {

class NativeOp : public Operator {
 public:
  NativeOp(OpSpec spec, std::vector<TensorDesc> outputs, NativeForward forward, NativeBackward backward,
           NativeOpInfo info)
      : Operator(std::move(spec), std::move(outputs)),
        forward_(std::move(forward)),
        backward_(std::move(backward)),
        info_(std::move(info)) {
    D5_CHECK_ARG(static_cast<bool>(forward_), "{}: custom_op_from_native needs a forward function",
                 spec_.label());
    if (info_.differentiable.empty() && backward_)
      for (const auto& d : spec_.inputs) info_.differentiable.push_back(is_floating(d.dtype));
    D5_CHECK_ARG(info_.differentiable.empty() || info_.differentiable.size() == spec_.inputs.size(),
                 "{}: differentiable mask has {} entries for {} inputs", spec_.label(),
                 info_.differentiable.size(), spec_.inputs.size());
    D5_CHECK_ARG(backward_ || !has_gradient(), "{}: inputs are marked differentiable but no backward was given",
                 spec_.label());
  }

  std::string implementation() const override { return info_.implementation; }
  std::vector<bool> differentiable_inputs() const override { return info_.differentiable; }
  std::string no_gradient_reason() const override { return "no backward function was given"; }
  double flops() const override { return info_.flops; }

  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override {
    check_inputs(inputs);
    detail::check_outputs(spec_, outputs_, outputs);
    guarded("forward", [&] { forward_(inputs, outputs); });
  }

  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                std::span<const Tensor> outputs, std::span<Tensor> grad_inputs) override {
    if (!backward_) Operator::backward(grad_outputs, inputs, outputs, grad_inputs);
    check_inputs(inputs);
    detail::check_outputs(spec_, outputs_, outputs);
    D5_CHECK_ARG(grad_inputs.size() == spec_.inputs.size(), "{}: {} input gradients given for {} inputs",
                 spec_.label(), grad_inputs.size(), spec_.inputs.size());
    const auto g = detail::defined_grad_outputs(spec_, outputs_, grad_outputs);
    guarded("backward", [&] { backward_(g, inputs, outputs, grad_inputs); });
  }

 private:
  // deep500 errors pass through; anything else is a failure of the user's code, reported as such
  // rather than escaping as an exception type callers do not expect.
  template <typename F>
  void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw InternalError(
          fmt::format("{} ({}): {} failed: {}", spec_.label(), implementation(), what, e.what()));
    }
  }

  NativeForward forward_;
  NativeBackward backward_;
  NativeOpInfo info_;
};

}  // namespace

std::unique_ptr<Operator> custom_op_from_native(OpSpec spec, std::vector<TensorDesc> output_descs,
                                                NativeForward forward, NativeBackward backward,
                                                NativeOpInfo info) {
  return std::make_unique<NativeOp>(std::move(spec), std::move(output_descs), std::move(forward),
                                    std::move(backward), std::move(info));
}

}  // namespace d5
