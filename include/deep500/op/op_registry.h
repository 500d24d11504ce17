#pragma once
// The operator registry: for each (op type, backend) an ordered list of named implementations.
// Creating an op asks them in order; one that cannot handle the spec refuses with a reason, and
// if all refuse the error lists every reason (oneDNN's dispatch style).
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "deep500/core/registry.h"
#include "deep500/op/operator.h"

namespace d5 {

// A factory returns an operator or a refusal reason. It throws InvalidArgument for a spec that
// is wrong for *every* implementation (bad shapes, missing attributes): that is the user's error,
// not a gap in one backend.
using OpCreateResult = std::variant<std::unique_ptr<Operator>, std::string>;
using OpFactory = std::function<OpCreateResult(const OpSpec&)>;

struct OpImplementation {
  std::string op_type;
  std::string backend;
  std::string name;        // unique within (op_type, backend): "reference", "onednn", ...
  bool backward = false;   // whether its operators implement backward
  OpFactory create;
  // When it refuses and what it does not do ("f32 only; no dilation"), or why there is no
  // backward; shown by `d5 ops list --why`.
  std::string notes;
};

class OpRegistry {
 public:
  static OpRegistry& global();

  void add(OpImplementation impl);
  // Adds, or replaces the implementation with the same (op_type, backend, name): for operators
  // registered at run time, which may be rebuilt and registered again.
  void add_or_replace(OpImplementation impl);
  // In registration order; each kept alive even if it is replaced meanwhile.
  std::vector<std::shared_ptr<const OpImplementation>> implementations(const std::string& op_type,
                                                                       const std::string& backend) const;
  std::vector<std::string> op_types() const;  // sorted, every type with any implementation
  std::vector<std::string> backends_of(const std::string& op_type) const;

  // First implementation of `backend` that accepts; throws Unimplemented naming the op, the
  // backend and every refusal when none does.
  std::unique_ptr<Operator> create(const OpSpec& spec, const std::string& backend) const;
  // Tries backends in order (e.g. {"onednn", "reference"}); `refusals` collects the reasons of
  // the ones skipped, so a report can say what ran where and why.
  std::unique_ptr<Operator> create_with_fallback(const OpSpec& spec, const std::vector<std::string>& backends,
                                                 std::vector<Refusal>* refusals = nullptr) const;
  // Every implementation's answer for this spec, without keeping the operator.
  std::vector<Refusal> explain(const OpSpec& spec, const std::string& backend) const;

 private:
  Registry<OpImplementation> impls_{"operator implementation"};  // by "type/backend/name"
};

// Adds `factory` as implementation "custom" of `op_type` on every backend registered so far (and
// always on "reference"), so a user operator runs inside any executor whatever backend it asks
// for; call it after register_builtin_operators() (backends/builtin.h). Replaces an earlier registration. On a backend
// with a custom-operator adapter the operators the factory creates are passed through it.
void register_custom_op(const std::string& op_type, OpFactory factory, bool backward, const std::string& notes = "");

// How a framework backend makes a custom operator its own: the torch backend wraps it as a
// LibTorch autograd function ("torch:autograd(custom:...)"), so it can sit in a graph of ATen
// operations. Registered by the backend (replacing an earlier one); applied by register_custom_op's
// factories when they create an operator for that backend.
using CustomOpAdapter = std::function<std::unique_ptr<Operator>(std::unique_ptr<Operator>)>;
void register_custom_op_adapter(const std::string& backend, CustomOpAdapter adapter);

}  // namespace d5
