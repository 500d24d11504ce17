#include "deep500/op/operator.h"

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

const Tensor* OpSpec::value(size_t i) const {
  if (i >= input_values.size() || !input_values[i] || !input_values[i]->defined()) return nullptr;
  return &*input_values[i];
}

std::string OpSpec::label() const { return name.empty() ? type : fmt::format("{} '{}'", type, name); }

bool Operator::has_gradient() const {
  for (bool b : differentiable_inputs())
    if (b) return true;
  return false;
}

void Operator::backward(std::span<const Tensor>, std::span<const Tensor>, std::span<const Tensor>,
                        std::span<Tensor>) {
  D5_THROW(Unimplemented, "{} ({}): {}", spec_.label(), implementation(),
           has_gradient() ? "backward is not implemented by this implementation" : no_gradient_reason());
}

double Operator::bytes() const {
  double b = 0;
  for (size_t i = 0; i < spec_.inputs.size(); ++i)
    if (spec_.has_input(i)) b += static_cast<double>(spec_.inputs[i].bytes());
  for (const auto& o : outputs_) b += static_cast<double>(o.bytes());
  return b;
}

void Operator::check_inputs(std::span<const Tensor> inputs) const {
  D5_CHECK_ARG(inputs.size() == spec_.inputs.size(), "{}: created for {} inputs, called with {}",
               spec_.label(), spec_.inputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!spec_.has_input(i)) continue;
    D5_CHECK_ARG(inputs[i].defined(), "{}: input {} is missing", spec_.label(), i);
    D5_CHECK_ARG(inputs[i].dtype() == spec_.inputs[i].dtype && inputs[i].shape() == spec_.inputs[i].shape,
                 "{}: input {} is {} but the operator was created for {}", spec_.label(), i,
                 inputs[i].desc().to_string(), spec_.inputs[i].to_string());
    D5_CHECK_ARG(inputs[i].device() == device(), "{}: input {} is on {} but the operator runs on {}",
                 spec_.label(), i, inputs[i].device().to_string(), device().to_string());
  }
}

std::vector<Tensor> to_device(std::span<const Tensor> ts, Device device) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.defined() ? t.to(device) : Tensor());
  return out;
}

std::vector<Tensor> Operator::run_forward(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs;
  outs.reserve(outputs_.size());
  for (const auto& d : outputs_) outs.push_back(Tensor::uninitialized(d, device()));
  forward(inputs, outs);
  return outs;
}

std::vector<Tensor> Operator::run_backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                                           std::span<const Tensor> outputs) {
  const auto mask = differentiable_inputs();
  std::vector<Tensor> grads(spec_.inputs.size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (i < mask.size() && mask[i] && spec_.has_input(i)) grads[i] = Tensor::uninitialized(spec_.inputs[i], device());
  backward(grad_outputs, inputs, outputs, grads);
  return grads;
}

}  // namespace d5
