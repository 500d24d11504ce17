#pragma once
// Level 0: any C++ callable as an Operator. A kernel under development (or one from another
// library) is then validated (test_gradient, comparison with the reference backend) and
// benchmarked through the same interface as every built-in operator, without writing a class.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

// inputs match spec.inputs; outputs are allocated by the caller from the output descriptors.
using NativeForward = std::function<void(std::span<const Tensor> inputs, std::span<Tensor> outputs)>;
// grad_outputs are always defined (zeros where the caller had no upstream gradient); grad_inputs
// are defined for differentiable inputs only, and must be overwritten completely.
using NativeBackward = std::function<void(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                                          std::span<const Tensor> outputs, std::span<Tensor> grad_inputs)>;

struct NativeOpInfo {
  std::string implementation = "native";  // what Operator::implementation() reports
  // Inputs with a gradient. Empty: every floating-point input when a backward is given, else none.
  std::vector<bool> differentiable;
  double flops = 0;  // of one forward, a fused multiply-add counting 2
};

// Exceptions other than d5::Error thrown by the callables become d5::InternalError naming the op.
std::unique_ptr<Operator> custom_op_from_native(OpSpec spec, std::vector<TensorDesc> output_descs,
                                                NativeForward forward, NativeBackward backward = {},
                                                NativeOpInfo info = {});

}  // namespace d5
