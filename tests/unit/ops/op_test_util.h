#pragma once
// Helpers shared by the reference operator tests.
#include <gtest/gtest.h>

#include <vector>

#include "deep500/op/op_registry.h"
#include "deep500/core/rng.h"
#include "deep500/op/validation.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

inline OpSpec spec_of(const std::string& type, std::vector<TensorDesc> inputs, Attributes attrs = {},
                      std::vector<std::optional<Tensor>> values = {}) {
  OpSpec s;
  s.type = type;
  s.attrs = std::move(attrs);
  s.inputs = std::move(inputs);
  s.input_values = std::move(values);
  return s;
}

inline std::unique_ptr<Operator> make_op(const OpSpec& s, const std::string& backend = "reference") {
  reference::register_all();
  return OpRegistry::global().create(s, backend);
}

// Uniform values in [lo, hi), seeded by `name`.
inline Tensor random_tensor(DType t, const Shape& shape, const std::string& name, double lo = -1, double hi = 1) {
  Tensor x(t, shape);
  RngStream r(1234, name);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, r.uniform(lo, hi));
  return x;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

// Asserts the op's backward matches finite differences (run in f64 for a tight check).
inline void expect_gradient_ok(Operator& op, const std::vector<Tensor>& inputs) {
  const auto r = test_gradient(op, inputs);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_GT(r.checked, 0);
}

}  // namespace d5::test
