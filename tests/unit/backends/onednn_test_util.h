#pragma once
// Helpers for the oneDNN backend tests: every operator is checked against the reference backend
// (forward outputs and input gradients for the same upstream gradients).
#include "../ops/op_test_util.h"
#include "deep500/backends/builtin.h"
#include "backend_test_util.h"

namespace d5::test {

inline std::vector<Tensor> random_inputs(const OpSpec& s, double lo = -1, double hi = 1) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < s.inputs.size(); ++i)
    in.push_back(random_input(s.inputs[i], s.type + std::to_string(i), lo, hi));
  return in;
}

// The reasons the oneDNN implementation gives for `spec` ("accepts" when it takes it).
inline std::string onednn_answer(const OpSpec& spec) {
  register_builtin_operators();
  const auto r = OpRegistry::global().explain(spec, "onednn");
  return r.empty() ? "no implementation" : r[0].reason;
}

inline std::string onednn_implementation(const OpSpec& spec) {
  register_builtin_operators();
  return OpRegistry::global().create(spec, "onednn")->implementation();
}

}  // namespace d5::test
