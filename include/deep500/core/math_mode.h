#pragma once
// How f32 matrix products may round (d5 --math, docs/cuda.md#tf32). `strict` keeps f32 operands
// exact, so every backend's result matches the reference's within f32 tolerances; `tf32` lets a
// GPU backend round operands to TensorFloat-32 (10 mantissa bits) on its tensor cores, several
// times faster and about 1e-3 relative off. Process-wide, and recorded in every manifest.
#include <string>

namespace d5 {

enum class F32Math { strict, tf32 };

void set_f32_math(F32Math m);
F32Math f32_math();
const char* to_string(F32Math m);
// "strict" or "tf32"; InvalidArgument naming the choices otherwise.
F32Math parse_f32_math(const std::string& s);

}  // namespace d5
