#include "deep500/core/math_mode.h"

#include <atomic>

#include "deep500/core/error.h"

namespace d5 {

namespace {
std::atomic<F32Math> g_math{F32Math::strict};
}

void set_f32_math(F32Math m) { g_math = m; }
F32Math f32_math() { return g_math; }

const char* to_string(F32Math m) {
  switch (m) {
    case F32Math::tf32: return "tf32";
    case F32Math::fast: return "fast";
    case F32Math::strict: break;
  }
  return "strict";
}

F32Math parse_f32_math(const std::string& s) {
  if (s == "strict") return F32Math::strict;
  if (s == "tf32") return F32Math::tf32;
  if (s == "fast") return F32Math::fast;
  D5_THROW(InvalidArgument,
           "--math '{}' is not known: use strict (f32 products exact), tf32 or fast (f32 operands, any algorithm)",
           s);
}

}  // namespace d5
