#pragma once
// The one place that sets thread counts: OpenMP (which oneDNN here uses as its CPU runtime),
// and every backend that registered a thread hook (LibTorch intra-op and inter-op pools).
#include <map>
#include <string>

namespace d5 {

struct ThreadSettings {
  int requested = 0;                      // 0 = library defaults
  int omp_max_threads = 0;                // as OpenMP reports after setting
  std::map<std::string, int> backends;    // backend -> threads it reports using
};

// n <= 0 leaves every library at its default. Throws InvalidArgument for absurd values.
void set_num_threads(int n);
ThreadSettings thread_settings();

}  // namespace d5
