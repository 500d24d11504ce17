#pragma once
// Helpers of the torch backend tests: every op is checked against the reference (forward and
// backward, identical upstream gradients) through expect_matches_reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../ops/op_test_util.h"
#include "deep500/backends/builtin.h"
#include "backend_test_util.h"

namespace d5::test {

// Tolerances, by dtype. Both backends compute in the input dtype; the reference accumulates sums
// and dot products in double and ATen in the dtype itself (blocked/vectorized), so f32 results
// differ by a few ulps of the accumulated magnitude: 1e-4 relative (about 1000 ulps, room for
// sums of a few hundred terms) and 1e-5 absolute for values near zero. f64 leaves ~1e-13.
// Half-precision gradients (sums of a few terms rounded to 11 significant bits by ATen, once by
// the reference) differ by a few of their ulps (~5e-4 relative).
inline Tolerance tol_for(DType t) {
  if (t == DType::f64) return {1e-9, 1e-11};
  if (t == DType::f16 || t == DType::bf16) return {4e-3, 1e-3};
  return {1e-4, 1e-5};
}

// Random inputs of the given descriptors (uniform in [lo, hi); integers floored), names "in0", ...
inline std::vector<Tensor> random_inputs(const std::vector<TensorDesc>& descs, double lo = -1,
                                         double hi = 1) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < descs.size(); ++i)
    v.push_back(random_input(descs[i], "in" + std::to_string(i), lo, hi));
  return v;
}

// The op on torch against the reference, with the inputs given.
inline void check(const std::string& type, const std::vector<Tensor>& inputs, Attributes attrs = {},
                  std::optional<Tolerance> tol = std::nullopt, int opset = 17) {
  std::vector<TensorDesc> descs;
  for (const auto& t : inputs) descs.push_back(t.defined() ? t.desc() : TensorDesc{});
  OpSpec s = spec_of(type, descs, std::move(attrs));
  s.opset = opset;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) {
      s.present.assign(inputs.size(), true);
      break;
    }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) s.present[i] = false;
  SCOPED_TRACE(s.label() + " " + s.attrs.to_string());
  expect_matches_reference(s, inputs, "torch",
                           tol.value_or(tol_for(inputs.empty() ? DType::f32 : inputs[0].dtype())));
}

// Constant inputs (Reshape's shape, Slice's starts, ...) go into the spec as known values too.
inline void check_spec(OpSpec s, const std::vector<Tensor>& inputs,
                       std::optional<Tolerance> tol = std::nullopt) {
  SCOPED_TRACE(s.label() + " " + s.attrs.to_string());
  expect_matches_reference(s, inputs, "torch",
                           tol.value_or(tol_for(inputs.empty() ? DType::f32 : inputs[0].dtype())));
}

inline Tensor i64s(std::vector<int64_t> v) {
  Tensor t(DType::i64, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
  return t;
}

// The reason torch gives for refusing the spec ("" when it accepts).
inline std::string torch_refusal(const OpSpec& s) {
  register_builtin_operators();
  for (const auto& r : OpRegistry::global().explain(s, "torch"))
    if (r.implementation == "torch") return r.reason;
  return "no torch implementation";
}

}  // namespace d5::test
