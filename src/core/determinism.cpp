#include "deep500/core/determinism.h"

#include <omp.h>

namespace d5 {

namespace {
bool g_deterministic = false;
}

void set_deterministic(bool on) {
  g_deterministic = on;
  if (on) omp_set_dynamic(0);
}

bool deterministic() { return g_deterministic; }

}  // namespace d5
