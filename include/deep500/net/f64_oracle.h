#pragma once
// The f64 oracle: a network's double-precision twin, run on the reference executor, gives the
// "exact" values that f32 results are measured against when the f32 reference cannot judge them
// element-wise (executor_validation.h). Deep batch-normalized networks amplify f32 rounding so
// much that two correct f32 executors disagree in the sign of most elements of some gradients:
// ResNet-50 at batch 4 in PyTorch alone, f32 against f64, is 0.8 % off (relative l2) in the last
// convolution's weight gradient and 2 % in the first's; its channels-last kernels 1.8 % and 5.3 %.
// An element-wise check there measures rounding, not correctness; a distance from the exact values,
// compared with the f32 reference's own, does measure correctness (docs/executors.md#the-f64-oracle).
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/net/graph_executor.h"
#include "deep500/net/network.h"
#include "deep500/op/validation.h"

namespace d5 {

// The same graph with every f32 value (graph inputs, initializers, tensor attributes, Cast
// targets) in f64; other dtypes (int64 labels, bool masks) are kept. Throws Unimplemented naming
// the node when an attribute names a type the twin cannot translate (a dtype other than Cast's).
Network f64_twin(const Network& network);

// The feeds with every f32 tensor cast to f64 (on the host), the others as they are.
TensorMap f64_feeds(const TensorMap& feeds);

// An executor's f32 tensor passes when its l2 distance from the exact values is at most
// kF64ErrorRatio times the f32 reference's own distance, plus kF64RelativeFloor times the exact
// values' norm. The ratio leaves room for kernels that round a few times worse than the reference
// (PyTorch's channels-last kernels above: up to 3.2 times its plain ones), while a wrong formula,
// which misses by the tensor's own size, stays far outside.
inline constexpr double kF64ErrorRatio = 8;
inline constexpr double kF64RelativeFloor = 1e-5;

struct F64Judgement {
  CaseState state = CaseState::Passed;  // PASSED or FAILED
  // FAILED: the first tensor outside its bound; PASSED: the worst ratio and the reference's error.
  std::string detail;
  std::vector<std::string> failed;  // names of the tensors outside their bound
  // Per tensor: {"name", "error", "reference_error", "allowed"} (relative l2 against exact).
  nlohmann::json tensors = nlohmann::json::array();
};

// Runs the twin of `network` on the reference executor with `feeds` (inference when `loss` is
// empty, else a training step from it) and judges each tensor of `tensors` by name: a graph
// output, or a parameter gradient ("W@grad"); `actual` is the executor's, `reference` the f32
// reference's. Throws Unimplemented when the network has no twin or the reference cannot run it.
F64Judgement judge_against_f64(const Network& network, const TensorMap& feeds, const std::string& loss,
                               std::span<const ComparedTensor* const> tensors);

}  // namespace d5
