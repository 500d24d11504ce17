#include "deep500/core/threads.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "deep500/core/backend.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {
std::atomic<int> g_requested = 0;

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}
}  // namespace

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
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
  s.allowed_cpus = allowed_cpus();
  return s;
}

}  // namespace d5
