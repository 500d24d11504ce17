#pragma once
// An operator whose backward takes an undefined grad_outputs entry as a zero gradient without
// reading memory for it, as Operator::backward's contract allows, and skips the work that term
// would cost (BatchNormalization in training: the running statistics' gradients are one more pass
// over the data). The operator executor passes such operators an undefined gradient for an output
// nothing differentiates; others get a zero-filled tensor there.
namespace d5 {

class SparseOutputGradients {
 public:
  virtual ~SparseOutputGradients() = default;
};

}  // namespace d5
