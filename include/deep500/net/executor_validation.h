#pragma once
// Level 1 validation: does an executor compute what the reference executor computes? Outputs,
// and in a training step every parameter gradient, are compared with Level 0's norms and
// tolerances (check_tensors: the worst element, l1/l2/linf, heatmaps, MISTRUSTED for degenerate
// references). docs/executors.md explains the tolerances.
#include <string>

#include "deep500/net/graph_executor.h"
#include "deep500/op/validation.h"

namespace d5 {

// The tolerance for a tensor computed through nodes of `op_types`: the loosest of Level 0's
// default_tolerance over them, since a result is no more accurate than its least accurate step.
Tolerance network_tolerance(DType dtype, const std::vector<std::string>& op_types);

// Runs executor.inference(feeds) and compares each given reference output (an output the
// executor did not produce is FAILED). options.rtol/atol override every tolerance; reruns is not
// used. The detail and extra name the tensors ("output 'logits'").
ForwardCheckResult test_executor(GraphExecutor& executor, const TensorMap& feeds,
                                 const TensorMap& reference_outputs, const ForwardCheckOptions& options = {});
// The reference outputs computed by another executor (usually a ReferenceExecutor, which may run
// the same Network object).
ForwardCheckResult test_executor(GraphExecutor& executor, const TensorMap& feeds, GraphExecutor& reference,
                                 const ForwardCheckOptions& options = {});

// One training step on both: the outputs, the loss and every parameter gradient of the
// executor's network against the reference's. A gradient's atol is at least its rtol times the
// largest reference gradient element: a gradient is a long sum whose rounding error scales with
// its terms, so elements that cancel to near zero carry errors of the tensor's scale.
ForwardCheckResult test_executor_backprop(GraphExecutor& executor, const TensorMap& feeds,
                                          const std::string& loss, GraphExecutor& reference,
                                          const ForwardCheckOptions& options = {});

}  // namespace d5
