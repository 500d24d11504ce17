#include "operator_autograd.h"

#include <torch/csrc/autograd/custom_function.h>

#include "deep500/error.h"
#include "torch_op.h"

namespace d5::torch_backend {

DType dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DType::f32;
    case at::kDouble:
      return DType::f64;
    case at::kHalf:
      return DType::f16;
    case at::kBFloat16:
      return DType::bf16;
    case at::kChar:
      return DType::i8;
    case at::kShort:
      return DType::i16;
    case at::kInt:
      return DType::i32;
    case at::kLong:
      return DType::i64;
    case at::kByte:
      return DType::u8;
    case at::kBool:
      return DType::boolean;
    default:
      break;
  }
  D5_THROW(InvalidArgument, "ATen dtype {} has no deep500 equivalent", c10::toString(t));
}

Tensor d5_view(const at::Tensor& t) {
  D5_CHECK(t.is_contiguous(), Internal, "d5_view of a non-contiguous ATen tensor");
  const TensorDesc desc{dtype_of(t.scalar_type()), Shape(t.sizes().vec()), Layout::any};
  return Tensor::view(desc, t.data_ptr(), Device::cpu());
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the autograd node needs besides tensors: the operator and where each tensor argument
// goes among the spec's inputs (absent optional inputs are not passed to autograd).
struct OperatorCall : torch::CustomClassHolder {
  Operator* op = nullptr;
  std::vector<size_t> input_index;  // tensor argument k is spec input input_index[k]
};

std::vector<Tensor> views_by_spec(const OperatorCall& call, const variable_list& present) {
  std::vector<Tensor> v(call.op->spec().inputs.size());
  for (size_t k = 0; k < present.size(); ++k) v[call.input_index[k]] = d5_view(present[k]);
  return v;
}

struct OperatorFunction : torch::autograd::Function<OperatorFunction> {
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<OperatorCall> call,
                               at::TensorList inputs) {
    Operator& op = *call->op;
    variable_list present;
    present.reserve(inputs.size());
    for (const auto& t : inputs) present.push_back(t.contiguous());
    const auto in = views_by_spec(*call, present);
    variable_list outputs;
    std::vector<Tensor> out;
    for (const auto& d : op.output_descs()) {
      outputs.push_back(at::empty(dims_of(d.shape), at::TensorOptions().dtype(scalar_type(d.dtype))));
      out.push_back(d5_view(outputs.back()));
    }
    op.forward(in, out);

    variable_list integral;
    for (const auto& o : outputs)
      if (!at::isFloatingType(o.scalar_type())) integral.push_back(o);
    if (!integral.empty()) ctx->mark_non_differentiable(integral);
    // An output without an upstream gradient stays undefined: d5 operators take that as zero.
    ctx->set_materialize_grads(false);
    variable_list saved = present;
    saved.insert(saved.end(), outputs.begin(), outputs.end());
    ctx->save_for_backward(std::move(saved));
    ctx->saved_data["call"] = at::IValue::make_capsule(std::move(call));
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto call = c10::static_intrusive_pointer_cast<OperatorCall>(ctx->saved_data["call"].toCapsule());
    Operator& op = *call->op;
    const auto saved = ctx->get_saved_variables();
    const size_t n_present = call->input_index.size();
    const variable_list present(saved.begin(), saved.begin() + static_cast<ptrdiff_t>(n_present));
    const variable_list outputs(saved.begin() + static_cast<ptrdiff_t>(n_present), saved.end());
    const auto in = views_by_spec(*call, present);
    std::vector<Tensor> out, grad_out(grad_outputs.size());
    for (const auto& o : outputs) out.push_back(d5_view(o));
    variable_list grad_out_contiguous(grad_outputs.size());
    for (size_t k = 0; k < grad_outputs.size(); ++k) {
      if (!grad_outputs[k].defined()) continue;
      grad_out_contiguous[k] = grad_outputs[k].contiguous();
      grad_out[k] = d5_view(grad_out_contiguous[k]);
    }

    const auto mask = op.differentiable_inputs();
    std::vector<Tensor> grad_in(op.spec().inputs.size());
    // One gradient per forward argument: the OperatorCall, then each present input.
    variable_list result(1 + n_present);
    bool any = false;
    for (size_t k = 0; k < n_present; ++k) {
      const size_t i = call->input_index[k];
      if (i >= mask.size() || !mask[i] || !ctx->needs_input_grad(k)) continue;
      result[1 + k] = at::empty(present[k].sizes(), present[k].options());
      grad_in[i] = d5_view(result[1 + k]);
      any = true;
    }
    if (any) op.backward(grad_out, in, out, grad_in);
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> run_operator(Operator& op, const std::vector<at::Tensor>& inputs) {
  const OpSpec& spec = op.spec();
  D5_CHECK_ARG(inputs.size() == spec.inputs.size(), "{}: {} inputs given, the operator has {}", spec.label(),
               inputs.size(), spec.inputs.size());
  auto call = c10::make_intrusive<OperatorCall>();
  call->op = &op;
  std::vector<at::Tensor> present;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!spec.has_input(i)) continue;
    D5_CHECK_ARG(inputs[i].defined(), "{}: input {} is missing", spec.label(), i);
    present.push_back(inputs[i]);
    call->input_index.push_back(i);
  }
  return OperatorFunction::apply(std::move(call), at::TensorList(present));
}

}  // namespace d5::torch_backend
