#pragma once
// Checks and conversions shared by the wrappers of user operators (native callables, libraries
// compiled at run time, and a backend's adapter such as torch's autograd function): user code
// gets the same guarantees from all of them.
#include <span>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5::detail {

// The caller-allocated outputs must match what the operator declared.
void check_outputs(const OpSpec& spec, const std::vector<TensorDesc>& declared,
                   std::span<const Tensor> outputs);

// Undefined upstream gradients mean zero; user code always receives defined ones.
std::vector<Tensor> defined_grad_outputs(const OpSpec& spec, const std::vector<TensorDesc>& declared,
                                         std::span<const Tensor> grad_outputs);

// "(f32[1, 3], i64[2])", for messages.
std::string describe(const std::vector<TensorDesc>& descs);

}  // namespace d5::detail
