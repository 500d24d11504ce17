#include "deep500/spi/custom_op_checks.h"

#include "deep500/core/error.h"

namespace d5 {

namespace detail {

void check_outputs(const OpSpec& spec, const std::vector<TensorDesc>& declared,
                   std::span<const Tensor> outputs) {
  D5_CHECK_ARG(outputs.size() == declared.size(), "{}: {} outputs given, the operator has {}", spec.label(),
               outputs.size(), declared.size());
  for (size_t k = 0; k < outputs.size(); ++k)
    D5_CHECK_ARG(outputs[k].defined() && outputs[k].dtype() == declared[k].dtype &&
                     outputs[k].shape() == declared[k].shape,
                 "{}: output {} is {} but the operator produces {}", spec.label(), k,
                 outputs[k].defined() ? outputs[k].desc().to_string() : "undefined", declared[k].to_string());
}

std::vector<Tensor> defined_grad_outputs(const OpSpec& spec, const std::vector<TensorDesc>& declared,
                                         std::span<const Tensor> grad_outputs) {
  D5_CHECK_ARG(grad_outputs.size() == declared.size(),
               "{}: {} output gradients given, the operator has {} outputs", spec.label(), grad_outputs.size(),
               declared.size());
  std::vector<Tensor> g;
  for (size_t k = 0; k < declared.size(); ++k) {
    if (!grad_outputs[k].defined()) {
      g.emplace_back(declared[k]);  // zero-filled
      continue;
    }
    D5_CHECK_ARG(grad_outputs[k].dtype() == declared[k].dtype && grad_outputs[k].shape() == declared[k].shape,
                 "{}: gradient of output {} is {} but the output is {}", spec.label(), k,
                 grad_outputs[k].desc().to_string(), declared[k].to_string());
    g.push_back(grad_outputs[k]);
  }
  return g;
}

std::string describe(const std::vector<TensorDesc>& descs) {
  std::string s;
  for (const auto& d : descs) s += fmt::format("{}{}", s.empty() ? "" : ", ", d.to_string());
  return fmt::format("({})", s);
}

}  // namespace detail

}  // namespace d5
