#include "deep500/op/op_semantics.h"

#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"

namespace d5 {

OpSemantics semantics_of(const Operator& op) {
  return OpSemantics{.outputs = op.output_descs(),
                     .differentiable = op.differentiable_inputs(),
                     .no_gradient_reason = op.no_gradient_reason(),
                     .flops = op.flops(),
                     .bytes = op.bytes(),
                     .backward_flops = op.backward_flops()};
}

OpSemantics op_semantics(const OpSpec& spec) {
  const OpRegistry& registry = OpRegistry::global();
  D5_CHECK(!registry.implementations(spec.type, kOracleBackend).empty(), Unimplemented,
           "{}: what '{}' computes is defined by the {} backend, which has no '{}' registered (a type only "
           "another backend implements, or register_builtin_operators() not called yet)",
           spec.label(), spec.type, kOracleBackend, spec.type);
  return semantics_of(*registry.create(spec, kOracleBackend));
}

}  // namespace d5
