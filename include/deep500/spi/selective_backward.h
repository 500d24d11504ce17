#pragma once
// An operator whose backward() also takes an undefined grad_inputs entry for a differentiable
// input whose gradient the caller does not need, and then skips computing it (a convolution's
// data gradient when the data is a graph input). The operator executor gives such operators only
// the gradients a parameter's gradient depends on; others get one for every differentiable input,
// as Operator::backward's contract says.
namespace d5 {

class SelectiveBackward {
 public:
  virtual ~SelectiveBackward() = default;
};

}  // namespace d5
