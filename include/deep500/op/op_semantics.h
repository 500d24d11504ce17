#pragma once
// What every correct implementation of a spec has in common, whichever backend runs it: its
// output descriptors, which inputs carry a gradient (and why the others do not), and the work of
// one call, for GFLOP/s and GB/s that compare backends on the same count. The oracle backend (the
// reference) defines them, once per operator type; another backend reads them here instead of
// restating ONNX's rules or linking the oracle (docs/contributing.md#an-operator).
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

// Dropout's seed when the node has no 'seed' attribute (ONNX leaves it to the runtime): every
// backend starts its mask stream from it, so a run is repeatable.
inline constexpr int64_t kDefaultDropoutSeed = 0xD5D0;

// The backend whose operators define semantics and validate every other backend's results.
inline constexpr char kOracleBackend[] = "reference";

struct OpSemantics {
  std::vector<TensorDesc> outputs;
  std::vector<bool> differentiable;  // per input; empty: no gradient at all
  std::string no_gradient_reason;
  double flops = 0, bytes = 0, backward_flops = 0;  // Operator's counts (operator.h)
};

// Creates the oracle's operator for `spec`, reads it and drops it. Throws InvalidArgument for a
// spec no backend may accept, and Unimplemented when the oracle's operators are not registered
// (register_builtin_operators) or it has no operator of this type.
OpSemantics op_semantics(const OpSpec& spec);

// The same counts of an operator already created.
OpSemantics semantics_of(const Operator& op);

}  // namespace d5
