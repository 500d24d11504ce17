#pragma once
// How f32 matrix products may round (d5 --math, docs/cuda.md#tf32). `strict` keeps f32 operands
// exact, so every backend's result matches the reference's within f32 tolerances; `tf32` lets a
// GPU backend round operands to TensorFloat-32 (10 mantissa bits) on its tensor cores, several
// times faster and about 1e-3 relative off; `fast` keeps f32 operands but lets a GPU backend run
// whichever algorithm it times fastest, FFT and Winograd transforms (rounding with the whole
// tensor's magnitude) and non-deterministic reductions included, as a framework's defaults do.
// Process-wide, and recorded in every manifest.
#include <string>

namespace d5 {

enum class F32Math { strict, tf32, fast };

void set_f32_math(F32Math m);
F32Math f32_math();
const char* to_string(F32Math m);
// "strict", "tf32" or "fast"; InvalidArgument naming the choices otherwise.
F32Math parse_f32_math(const std::string& s);

}  // namespace d5
