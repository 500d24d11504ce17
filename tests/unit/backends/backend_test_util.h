#pragma once
// Cross-backend checks: an operator of backend B must compute what the reference computes, forward
// and backward, for the same inputs and the same upstream gradients.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "deep500/backends/builtin.h"
#include "deep500/op/op_registry.h"
#include "deep500/core/rng.h"
#include "deep500/op/validation.h"

namespace d5::test {

struct Tolerance {
  double rtol = 1e-4, atol = 1e-5;
};

inline Tensor random_input(const TensorDesc& d, const std::string& name, double lo = -1, double hi = 1) {
  Tensor x(d);
  RngStream r(4321, name);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, is_floating(d.dtype) ? r.uniform(lo, hi) : std::floor(r.uniform(lo, hi)));
  return x;
}

inline void expect_close(const Tensor& actual, const Tensor& expected, const Tolerance& tol, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  const auto c = compare(actual, expected, tol.rtol, tol.atol);
  EXPECT_EQ(c.mismatches, 0) << what << ": worst element " << c.worst_index << " |diff| " << c.max_abs_error
                             << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
}

// Runs `spec` on `backend` and on the reference; compares outputs and, when both have a backward,
// the input gradients for identical random upstream gradients. The work counts and which inputs
// carry a gradient are the operator's, not the backend's (op_semantics.h): they must be equal.
inline void expect_matches_reference(const OpSpec& spec, const std::vector<Tensor>& inputs,
                                     const std::string& backend, Tolerance tol = {}, bool backward = true) {
  register_builtin_operators();
  auto op = OpRegistry::global().create(spec, backend);
  auto ref = OpRegistry::global().create(spec, "reference");
  EXPECT_DOUBLE_EQ(op->flops(), ref->flops()) << spec.label() << " on " << backend << ": flops";
  EXPECT_DOUBLE_EQ(op->bytes(), ref->bytes()) << spec.label() << " on " << backend << ": bytes";
  if (op->has_gradient() && ref->has_gradient()) {
    EXPECT_EQ(op->differentiable_inputs(), ref->differentiable_inputs())
        << spec.label() << " on " << backend << ": differentiable inputs";
  }
  // A backend on another device gets copies of the inputs there; results are compared on the host.
  const auto on_device = to_device(inputs, op->device());
  const auto out = op->run_forward(on_device);
  const auto ref_out = ref->run_forward(inputs);
  ASSERT_EQ(out.size(), ref_out.size());
  for (size_t k = 0; k < out.size(); ++k)
    expect_close(out[k], ref_out[k], tol, fmt::format("{} on {}: output {}", spec.label(), backend, k));
  if (!backward || !op->has_gradient() || !ref->has_gradient()) return;

  std::vector<Tensor> gy;
  for (size_t k = 0; k < out.size(); ++k)
    gy.push_back(is_floating(out[k].dtype()) ? random_input(out[k].desc(), "upstream" + std::to_string(k)) : Tensor());
  const auto gx = op->run_backward(to_device(gy, op->device()), on_device, out);
  const auto ref_gx = ref->run_backward(gy, inputs, ref_out);
  const auto mask = op->differentiable_inputs();
  for (size_t i = 0; i < gx.size(); ++i)
    if (i < mask.size() && mask[i] && gx[i].defined() && ref_gx[i].defined())
      expect_close(gx[i], ref_gx[i], tol, fmt::format("{} on {}: gradient of input {}", spec.label(), backend, i));
}

}  // namespace d5::test
