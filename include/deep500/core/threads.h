#pragma once
// The one place that sets thread counts: OpenMP (which oneDNN here uses as its CPU runtime),
// and every backend that registered a thread hook (LibTorch intra-op and inter-op pools).
#include <map>
#include <string>
#include <vector>

namespace d5 {

struct ThreadSettings {
  int requested = 0;                      // 0 = library defaults
  int omp_max_threads = 0;                // as OpenMP reports after setting
  std::map<std::string, int> backends;    // backend -> threads it reports using
  // The CPUs the calling thread may run on (sched_getaffinity): fewer than the host's under
  // `taskset`, a cgroup's cpuset or a batch scheduler's binding; empty when it cannot be read.
  std::vector<int> allowed_cpus;
};

// "0-3,6,8-9": the kernel's cpulist notation, ascending; empty for none.
std::string format_cpu_list(std::vector<int> cpus);

// n <= 0 leaves every library at its default. Throws InvalidArgument for absurd values.
void set_num_threads(int n);
// As the calling thread sees them (OpenMP's count is the calling thread's).
ThreadSettings thread_settings();

// OpenMP's thread count is a setting of each thread: a thread started after set_num_threads runs
// its parallel regions (oneDNN's primitives among them) with the library default, every core,
// until it applies the requested count. Every thread d5 starts to run operators calls this first;
// no-op when no count was requested.
void apply_thread_settings_to_this_thread();

}  // namespace d5
