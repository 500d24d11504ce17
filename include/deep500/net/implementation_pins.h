#pragma once
// Pinned implementations: the user names the implementation that must run every node of an op
// type ("Conv" -> "reference:batched-im2col"), as a cuDNN user fixes a convolution algorithm.
// Without a pin, operator executors take the first implementation that accepts (falling back to
// slower or leaner ones); with one, a node the pinned implementation refuses is an error that
// says why — which is how a memory cap that the fast algorithm does not fit becomes visible,
// and how micro-batching (microbatch.h) is shown to make it fit.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

using ImplementationPins = std::map<std::string, std::string>;  // op type -> implementation name

// Parses "OP=IMPLEMENTATION" items (the CLI's --pin); InvalidArgument for a malformed item, an
// implementation the registry does not have for that op type, or two pins of one op type.
ImplementationPins parse_implementation_pins(const std::vector<std::string>& items);

struct CreatedOperator {
  std::unique_ptr<Operator> op;
  size_t backend = 0;             // index into the backends it was created from
  std::vector<Refusal> refusals;  // of the implementations skipped before it
};

// Creates the operator of `spec`: with a pin for spec.type only that implementation, on the first
// of `backends` that has it (Unimplemented with its refusal when it refuses, or naming the
// backends when none has it); without one, OpRegistry::create_with_fallback.
CreatedOperator create_operator(const OpSpec& spec, const std::vector<std::string>& backends,
                                const ImplementationPins& pins);

}  // namespace d5
