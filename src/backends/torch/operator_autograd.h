#pragma once
// Any d5 Operator as a node of a LibTorch autograd graph: its forward runs on d5 views of the ATen
// inputs (no copy for contiguous ones) and its backward is the operator's own backward. The torch
// graph executor runs the nodes the torch backend refuses (reference fallbacks, custom operators)
// this way, so one autograd graph still spans the whole network.
#include <ATen/ATen.h>

#include <vector>

#include "deep500/operator.h"

namespace d5::torch_backend {

// The d5 dtype of an ATen scalar type; InvalidArgument for types deep500 has not.
DType dtype_of(at::ScalarType t);
// A d5 view of t's buffer; t must be contiguous and of a dtype deep500 has.
Tensor d5_view(const at::Tensor& t);

// Runs op on `inputs` (one per spec input, undefined where an optional input is absent; dtypes and
// shapes as the spec's descriptors) and returns its outputs as new ATen tensors. When grad mode is
// on and an input requires grad, the outputs carry an autograd node whose backward calls
// op.backward() with the saved inputs and outputs; the operator must therefore not be forwarded
// again before that backward has run (operators keep state from their last forward). Outputs of
// non-floating dtypes are not differentiable.
std::vector<at::Tensor> run_operator(Operator& op, const std::vector<at::Tensor>& inputs);

}  // namespace d5::torch_backend
