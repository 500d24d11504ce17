#include "backward_events.h"

#include <torch/csrc/autograd/custom_function.h>

namespace d5::torch_backend {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct HookHolder : torch::CustomClassHolder {
  GradientHook hook;
  std::vector<size_t> position;  // tensor argument k is position[k] of the caller's list
  size_t count = 0;              // length of the caller's list
};

struct ObserveGradients : torch::autograd::Function<ObserveGradients> {
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<HookHolder> holder, at::TensorList xs) {
    ctx->set_materialize_grads(false);
    ctx->saved_data["hook"] = at::IValue::make_capsule(std::move(holder));
    return variable_list(xs.begin(), xs.end());  // identity: autograd makes each a view with this node
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<HookHolder>(ctx->saved_data["hook"].toCapsule());
    std::vector<at::Tensor> by_position(holder->count);
    for (size_t k = 0; k < grads.size(); ++k) by_position[holder->position[k]] = grads[k];
    holder->hook(by_position);
    variable_list result(1 + grads.size());  // none for the holder, then the gradients unchanged
    for (size_t k = 0; k < grads.size(); ++k) result[1 + k] = grads[k];
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> observe_gradients(const std::vector<at::Tensor>& tensors, GradientHook hook) {
  auto holder = c10::make_intrusive<HookHolder>();
  holder->hook = std::move(hook);
  holder->count = tensors.size();
  std::vector<at::Tensor> tracked;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined() && tensors[i].requires_grad()) {
      tracked.push_back(tensors[i]);
      holder->position.push_back(i);
    }
  if (tracked.empty()) return tensors;
  const auto positions = holder->position;
  const auto through = ObserveGradients::apply(std::move(holder), at::TensorList(tracked));
  std::vector<at::Tensor> out = tensors;
  for (size_t k = 0; k < positions.size(); ++k) out[positions[k]] = through[k];
  return out;
}

}  // namespace d5::torch_backend
