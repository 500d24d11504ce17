#pragma once
// Custom operators inside LibTorch's autograd. A deep500 operator (above all one compiled at run
// time, whose forward and backward are the library's C ABI entry points) becomes a
// torch::autograd::Function: its forward runs the operator on the buffers of the at::Tensors it is
// given and returns ATen-allocated outputs, and the graph node it leaves calls the operator's
// backward on the saved inputs and outputs. A graph of at::Tensors (the Level-1 torch executor's)
// can then mix ATen operations and custom operators, and backpropagate through both.
//
// A deep500 operator's backward belongs to its most recent forward (it may keep state from it).
// The graph node therefore remembers which forward of the operator it recorded; when the operator
// has run another forward since (the same operator applied twice before backward), the node runs
// forward again on its saved inputs before calling backward.
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "deep500/op/operator.h"

namespace d5::torch_backend {

// Runs `op` on `inputs` (one per spec input, of the spec's dtype and shape, any strides; undefined
// for an absent optional input) and returns one at::Tensor per output. Where grad mode is on and
// an input requires grad, the floating-point outputs of an operator with a gradient carry a
// grad_fn calling op's backward (gradients only for the inputs op marks differentiable); integer
// outputs never require grad. The graph keeps `op` alive. Errors of op (InvalidArgument for wrong
// inputs) propagate unchanged, also out of torch::autograd::grad / backward().
std::vector<at::Tensor> apply_custom_op(const std::shared_ptr<Operator>& op,
                                        const std::vector<at::Tensor>& inputs);

// The torch backend's Operator for a custom operator (what register_custom_op registers on backend
// "torch"): implementation() "torch:autograd(<op's implementation>)". forward runs apply_custom_op
// with autograd off and hands the ATen outputs to owned output tensors without a copy; backward
// replays it with autograd on and calls torch::autograd::grad, as every TorchOp does. Work counts,
// gradient mask and reasons are op's. `inner()` is the wrapped operator, for apply_custom_op.
class AutogradOp final : public Operator {
 public:
  explicit AutogradOp(std::unique_ptr<Operator> inner);

  std::string implementation() const override { return "torch:autograd(" + inner_->implementation() + ")"; }
  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  std::vector<bool> differentiable_inputs() const override { return inner_->differentiable_inputs(); }
  std::string no_gradient_reason() const override { return inner_->no_gradient_reason(); }
  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                std::span<const Tensor> outputs, std::span<Tensor> grad_inputs) override;
  double flops() const override { return inner_->flops(); }
  double bytes() const override { return inner_->bytes(); }
  double backward_flops() const override { return inner_->backward_flops(); }

  const std::shared_ptr<Operator>& inner() const { return inner_; }

 private:
  std::shared_ptr<Operator> inner_;
};

}  // namespace d5::torch_backend
