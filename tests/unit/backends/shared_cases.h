#pragma once
// The shared operator cases (ggml's test-backend-ops style): every case runs on every built
// backend that has operators, against the reference backend: forward outputs and, where both have
// a gradient, the input gradients for identical upstream gradients. A backend that refuses a case
// counts it as UNIMPLEMENTED (its own reason), never as a skip or a pass; a new backend gets every
// case without a line of test code. The tally per backend is printed at the end of the binary, and
// every operator type a backend registers must have met at least one case.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../ops/op_test_util.h"
#include "backend_test_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"

namespace d5::test {

// Tolerances, by dtype. Backends compute in the input dtype; the reference accumulates sums and
// dot products in double and a framework in the dtype itself (blocked/vectorized), so f32 results
// differ by a few ulps of the accumulated magnitude: 1e-4 relative (about 1000 ulps, room for sums
// of a few hundred terms) and 1e-5 absolute for values near zero. f64 leaves ~1e-13. Half-precision
// gradients (sums of a few terms rounded to 11 significant bits) differ by a few of their ulps.
inline Tolerance tol_for(DType t) {
  if (t == DType::f64) return {1e-9, 1e-11};
  if (t == DType::f16 || t == DType::bf16) return {4e-3, 1e-3};
  return {1e-4, 1e-5};
}

// Random inputs of the given descriptors (uniform in [lo, hi); integers floored), names "in0", ...
inline std::vector<Tensor> random_inputs(const std::vector<TensorDesc>& descs, double lo = -1, double hi = 1) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < descs.size(); ++i) v.push_back(random_input(descs[i], "in" + std::to_string(i), lo, hi));
  return v;
}

inline Tensor i64s(std::vector<int64_t> v) {
  Tensor t(DType::i64, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
  return t;
}

// Built backends with operators that cannot run here (a GPU backend without a GPU), and why:
// the report names them, and their own test binaries show the skip (d5_test_cuda).
inline std::map<std::string, std::string>& unavailable_case_backends() {
  static std::map<std::string, std::string> m;
  return m;
}

// Every built and available backend with operators, but the reference (the oracle).
inline const std::vector<std::string>& case_backends() {
  static const std::vector<std::string> names = [] {
    register_builtin_operators();
    std::vector<std::string> out;
    for (const BackendPlugin* p : builtin_plugins()) {
      if (!p->register_operators || std::string(p->name) == "reference") continue;
      const auto info = find_backend(p->name);
      if (info && !info->available)
        unavailable_case_backends()[p->name] = info->unavailable_reason;
      else
        out.emplace_back(p->name);
    }
    return out;
  }();
  return names;
}

struct CaseTally {
  struct PerBackend {
    int passed = 0, failed = 0, unimplemented = 0;
    std::set<std::string> types_checked;           // a case of this type ran (passed or failed)
    std::map<std::string, std::string> refusals;  // type -> first reason
  };
  std::map<std::string, PerBackend> backends;
};
inline CaseTally& case_tally() {
  static CaseTally t;
  return t;
}

// `spec` on every case backend against the reference (constant inputs belong in the spec's
// input_values, as for check_spec).
inline void check_spec(OpSpec s, const std::vector<Tensor>& inputs, std::optional<Tolerance> tol = std::nullopt) {
  SCOPED_TRACE(s.label() + " " + s.attrs.to_string());
  const Tolerance t = tol.value_or(tol_for(inputs.empty() ? DType::f32 : inputs[0].dtype()));
  for (const auto& backend : case_backends()) {
    auto& b = case_tally().backends[backend];
    std::vector<Refusal> refusals;
    try {
      OpRegistry::global().create(s, backend);
    } catch (const Unimplemented& e) {
      ++b.unimplemented;
      b.refusals.emplace(s.type, e.what());
      continue;
    }
    const bool failed_before = ::testing::Test::HasFailure();
    expect_matches_reference(s, inputs, backend, t);
    const bool failed = !failed_before && ::testing::Test::HasFailure();
    ++(failed ? b.failed : b.passed);
    b.types_checked.insert(s.type);
  }
}

// Inputs that are wrong for the spec's values (an index out of range, an integer division by
// zero): every backend that takes the spec throws InvalidArgument when it runs, as the reference.
inline void expect_run_refused_everywhere(const OpSpec& s, const std::vector<Tensor>& inputs) {
  SCOPED_TRACE(s.label());
  EXPECT_THROW(OpRegistry::global().create(s, "reference")->run_forward(inputs), InvalidArgument);
  for (const auto& backend : case_backends()) {
    auto& b = case_tally().backends[backend];
    std::unique_ptr<Operator> op;
    try {
      op = OpRegistry::global().create(s, backend);
    } catch (const Unimplemented& e) {
      ++b.unimplemented;
      b.refusals.emplace(s.type, e.what());
      continue;
    }
    const bool failed_before = ::testing::Test::HasFailure();
    EXPECT_THROW(op->run_forward(inputs), InvalidArgument) << backend;
    ++(!failed_before && ::testing::Test::HasFailure() ? b.failed : b.passed);
    b.types_checked.insert(s.type);
  }
}

// The op with the inputs given (an undefined tensor: an omitted optional input).
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
  check_spec(s, inputs, tol);
}

}  // namespace d5::test
