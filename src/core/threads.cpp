#include "deep500/core/threads.h"

#include <omp.h>

#include <atomic>

#include "deep500/core/backend.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {
std::atomic<int> g_requested = 0;
}

void set_num_threads(int n) {
  D5_CHECK_ARG(n <= 4096, "thread count {} is not plausible; use 0 for library defaults", n);
  g_requested = n > 0 ? n : 0;
  if (n <= 0) return;
  omp_set_num_threads(n);
  for (const auto& b : backends())
    if (b.set_threads) b.set_threads(n);
}

void apply_thread_settings_to_this_thread() {
  if (const int n = g_requested.load(); n > 0) omp_set_num_threads(n);
}

ThreadSettings thread_settings() {
  ThreadSettings s;
  s.requested = g_requested;
  s.omp_max_threads = omp_get_max_threads();
  for (const auto& b : backends())
    if (b.get_threads) s.backends[b.name] = b.get_threads();
  return s;
}

}  // namespace d5
