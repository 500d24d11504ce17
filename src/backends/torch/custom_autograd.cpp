#include "custom_autograd.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "deep500/spi/custom_op_checks.h"
#include "deep500/core/error.h"
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// An operator as the graph keeps it, with the number of forwards it has run.
struct OpState : torch::CustomClassHolder {
  explicit OpState(std::shared_ptr<Operator> o) : op(std::move(o)) {}
  std::shared_ptr<Operator> op;
  int64_t forwards = 0;
};

// One state per live operator, so every node of every graph that applies it sees the same count.
// Entries die with the last node (and call) that holds them.
c10::intrusive_ptr<OpState> state_of(const std::shared_ptr<Operator>& op) {
  static std::mutex mutex;
  static std::unordered_map<const Operator*, c10::weak_intrusive_ptr<OpState>> table;
  std::lock_guard lock(mutex);
  if (auto it = table.find(op.get()); it != table.end())
    if (auto s = it->second.lock(); s && s->op == op) return s;
  std::erase_if(table, [](const auto& e) { return e.second.expired(); });
  auto s = c10::make_intrusive<OpState>(op);
  table.insert_or_assign(op.get(), c10::weak_intrusive_ptr<OpState>(s));
  return s;
}

// A deep500 view of t's elements: of t itself when it is a contiguous, 64-byte-aligned host
// tensor, else of a copy that is; `held` keeps the viewed at::Tensor alive while the view is used.
Tensor borrow(const at::Tensor& t, std::vector<at::Tensor>& held) {
  if (!t.defined()) return {};
  D5_CHECK_ARG(t.device().is_cpu() && t.layout() == at::kStrided,
               "custom operators take dense host tensors, got {}", t.toString());
  at::Tensor c = t.contiguous();
  if (c.numel() > 0 && !is_tensor_aligned(c.data_ptr())) c = c.clone();
  held.push_back(c);
  return Tensor::view(TensorDesc{dtype_of(c.scalar_type()), Shape(c.sizes().vec()), Layout::any},
                      c.data_ptr());
}

at::Tensor empty_like_desc(const TensorDesc& d) {
  return at::empty(d.shape.dims(), at::TensorOptions().dtype(scalar_type(d.dtype)));
}

struct CustomOpFunction : torch::autograd::Function<CustomOpFunction> {
  static variable_list forward(AutogradContext* ctx, const c10::intrusive_ptr<OpState>& state,
                               at::TensorList inputs) {
    Operator& op = *state->op;
    const OpSpec& spec = op.spec();
    D5_CHECK_ARG(inputs.size() == spec.inputs.size(), "{} ({}): {} inputs given, the operator takes {}",
                 spec.label(), op.implementation(), inputs.size(), spec.inputs.size());
    std::vector<at::Tensor> held;
    std::vector<Tensor> in;
    for (const auto& t : inputs) in.push_back(borrow(t, held));
    // The operator writes straight into ATen-allocated outputs.
    variable_list outs;
    std::vector<Tensor> out;
    for (const auto& d : op.output_descs()) {
      outs.push_back(empty_like_desc(d));
      out.push_back(Tensor::view(d, outs.back().data_ptr()));
    }
    op.forward(in, out);
    ++state->forwards;

    ctx->saved_data["state"] = at::IValue::make_capsule(state);
    ctx->saved_data["forward"] = state->forwards;
    variable_list saved(inputs.begin(), inputs.end());
    saved.insert(saved.end(), outs.begin(), outs.end());
    ctx->save_for_backward(saved);
    variable_list constant;
    for (const auto& o : outs)
      if (!op.has_gradient() || !at::isFloatingType(o.scalar_type())) constant.push_back(o);
    ctx->mark_non_differentiable(constant);
    return outs;
  }

  // grad_outputs are defined (autograd passes zeros for outputs without a gradient).
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<OpState>(ctx->saved_data["state"].toCapsule());
    Operator& op = *state->op;
    const size_t n_in = op.spec().inputs.size();
    const variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> held;
    std::vector<Tensor> in, out, gy;
    for (size_t i = 0; i < n_in; ++i) in.push_back(borrow(saved[i], held));
    for (size_t k = 0; k < op.output_descs().size(); ++k) {
      out.push_back(borrow(saved[n_in + k], held));
      gy.push_back(borrow(grad_outputs[k], held));
    }
    if (state->forwards != ctx->saved_data["forward"].toInt()) {
      // The operator ran other forwards since this node's: give it this one back.
      std::vector<Tensor> scratch;
      for (const auto& d : op.output_descs()) scratch.push_back(Tensor::uninitialized(d));
      op.forward(in, scratch);
      ctx->saved_data["forward"] = ++state->forwards;
    }
    const auto mask = op.differentiable_inputs();
    variable_list grads(1 + n_in);  // grads[0]: the state argument has none
    std::vector<Tensor> gx(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      if (i >= mask.size() || !mask[i] || !in[i].defined() || !ctx->needs_input_grad(i)) continue;
      grads[1 + i] = empty_like_desc(in[i].desc());
      gx[i] = Tensor::view(in[i].desc(), grads[1 + i].data_ptr());
    }
    op.backward(gy, in, out, gx);
    return grads;
  }
};

// ATen's own errors (shape mismatches in autograd::grad) become InvalidArgument naming the op;
// deep500's errors pass unchanged.
template <typename F>
auto guarded(const Operator& op, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    D5_THROW(InvalidArgument, "{} ({}): {}", op.spec().label(), op.implementation(),
             e.what_without_backtrace());
  }
}

}  // namespace

std::vector<at::Tensor> apply_custom_op(const std::shared_ptr<Operator>& op,
                                        const std::vector<at::Tensor>& inputs) {
  D5_CHECK_ARG(op != nullptr, "apply_custom_op: no operator given");
  return CustomOpFunction::apply(state_of(op), at::TensorList(inputs));
}

AutogradOp::AutogradOp(std::unique_ptr<Operator> inner)
    : Operator(inner->spec(), inner->output_descs()), inner_(std::move(inner)) {}

void AutogradOp::forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  check_inputs(inputs);
  detail::check_outputs(spec_, outputs_, outputs);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(spec_.has_input(i) ? view_of(inputs[i]) : at::Tensor());
  const auto res = apply_custom_op(inner_, in);
  guarded(*this, [&] {
    for (size_t k = 0; k < res.size(); ++k) store_result(res[k], outputs[k], view_of(outputs[k]));
    return 0;
  });
}

void AutogradOp::backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                          std::span<const Tensor>, std::span<Tensor> grad_inputs) {
  check_inputs(inputs);
  D5_CHECK_ARG(has_gradient(), "{}: {}", spec_.label(), no_gradient_reason());
  D5_CHECK_ARG(grad_inputs.size() == spec_.inputs.size(), "{}: {} input gradients given for {} inputs",
               spec_.label(), grad_inputs.size(), spec_.inputs.size());
  const auto mask = differentiable_inputs();
  std::vector<at::Tensor> in, leaves;
  std::vector<size_t> leaf_input;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(spec_.has_input(i) ? view_of(inputs[i]) : at::Tensor());
    if (i >= mask.size() || !mask[i] || !grad_inputs[i].defined() || !in[i].defined()) continue;
    if (!at::isFloatingType(in[i].scalar_type())) {  // autograd has no integer leaves: zero gradient
      std::memset(grad_inputs[i].data(), 0, grad_inputs[i].bytes());
      continue;
    }
    in[i] = in[i].detach().requires_grad_(true);
    leaves.push_back(in[i]);
    leaf_input.push_back(i);
  }
  if (leaves.empty()) return;
  // Backward replays forward under autograd, as every operator of this backend does.
  std::vector<at::Tensor> roots, seeds;
  {
    at::AutoGradMode grad_mode(true);
    const auto res = apply_custom_op(inner_, in);
    for (size_t k = 0; k < res.size(); ++k) {
      if (k >= grad_outputs.size() || !grad_outputs[k].defined() || !res[k].requires_grad()) continue;
      roots.push_back(res[k]);
      seeds.push_back(view_of(grad_outputs[k]));
    }
  }
  std::vector<at::Tensor> grads(leaves.size());
  if (!roots.empty())
    grads = guarded(*this, [&] {
      return torch::autograd::grad(roots, leaves, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                                   /*allow_unused=*/true);
    });
  guarded(*this, [&] {
    for (size_t j = 0; j < leaves.size(); ++j) {
      Tensor& gx = grad_inputs[leaf_input[j]];
      const at::Tensor dst = view_of(gx);
      if (grads[j].defined())
        store_result(grads[j], gx, dst);
      else if (dst.numel() > 0)
        dst.zero_();
    }
    return 0;
  });
}

}  // namespace d5::torch_backend
