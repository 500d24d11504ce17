#pragma once
// What an operator type is, independent of any backend (docs/contributing.md#an-operator): its
// place in ONNX and the numeric class its validation tolerance follows. One line per type, in
// src/lv0/op_traits.cpp; backends implement types, they never redefine them. The ONNX importer
// takes every type whose ONNX opset it reads as it is (a few need a visitor, registered with the
// importer); test_forward's default tolerances follow the numeric class. What depends on a spec
// (outputs, differentiable inputs, flops, bytes) is op_semantics' (op_semantics.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace d5 {

// How far two correct implementations may differ (validation.h's default_tolerance):
enum class NumericClass {
  elementwise,     // at most one rounding per element (data movement too): the dtype's base tolerance
  transcendental,  // vectorized approximations of a few ulp: 5x rtol, 10x atol
  accumulating,    // rounding grows with a reduction length and its order: 10x both
};
const char* to_string(NumericClass c);

struct OpTraits {
  std::string type;
  // The first ONNX opset (default domain) that defines it; 0 for types ONNX does not have
  // (deep500's own losses). Types newer than the importer's last opset are not imported.
  int onnx_since = 0;
  NumericClass numerics = NumericClass::elementwise;
  // Outputs whose length depends on the input values (NonMaxSuppression's selected_indices), by
  // index. d5 infers shapes before execution, so such an output gets a static bound instead: its
  // first dimension is the most rows any input can produce, the real rows come first, and every
  // element of the rows past them is kPaddingValue. Readers keep the rows before the first
  // padding row (the ONNX conformance runner compares those and checks the rest is padding).
  std::vector<int> padded_outputs = {};
};

// Every element of a padded output's rows past its real ones. The real rows hold indices, which
// are never negative, so the first row of -1 ends them.
inline constexpr int64_t kPaddingValue = -1;

// Adds or replaces a type's traits (a user's operator type, say).
void register_op_traits(OpTraits traits);
// Null for a type nobody described.
std::shared_ptr<const OpTraits> op_traits(const std::string& type);
std::vector<std::string> described_op_types();  // sorted

}  // namespace d5
