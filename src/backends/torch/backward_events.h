#pragma once
// Per-node events in a LibTorch backward pass. Autograd, not the executor, walks the backward
// graph, so the torch executor puts an identity autograd node on each side of a node's kernel:
// one over its outputs, whose backward runs once every gradient flowing into those outputs is
// summed (just before the node's own backward), and one over its inputs, whose backward receives
// exactly this node's contributions to its inputs' gradients (just after the node's backward).
// They are inserted only when events are attached, so an executor without events pays nothing.
#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace d5::torch_backend {

// Called with one gradient per tensor given to observe_gradients (undefined where none flowed or
// the tensor does not require grad).
using GradientHook = std::function<void(const std::vector<at::Tensor>& gradients)>;

// Returns `tensors` through an identity autograd node whose backward calls `hook` and passes the
// gradients on unchanged. Tensors that do not require grad (and undefined ones) are returned as
// they are. When none requires grad, the hook is never called (nothing flows back here).
std::vector<at::Tensor> observe_gradients(const std::vector<at::Tensor>& tensors, GradientHook hook);

}  // namespace d5::torch_backend
