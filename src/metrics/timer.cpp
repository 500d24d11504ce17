#include "deep500/metrics/timer.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "deep500/core/error.h"

namespace d5 {

namespace {
int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t read(ClockKind k) {
  switch (k) {
    case ClockKind::Wall: return wall_now_ns();
    case ClockKind::ProcessCpu: return process_cpu_now_ns();
    case ClockKind::ThreadCpu: return thread_cpu_now_ns();
  }
  return 0;
}

ClockCharacteristics measure(ClockKind k) {
  ClockCharacteristics c{};
  timespec res{};
  const clockid_t id = k == ClockKind::Wall         ? CLOCK_MONOTONIC
                       : k == ClockKind::ProcessCpu ? CLOCK_PROCESS_CPUTIME_ID
                                                    : CLOCK_THREAD_CPUTIME_ID;
  clock_getres(id, &res);
  c.reported_resolution_ns = static_cast<double>(res.tv_sec) * 1e9 + static_cast<double>(res.tv_nsec);

  // Smallest observed non-zero step between consecutive reads (bounded search).
  int64_t smallest = INT64_MAX;
  for (int i = 0; i < 20000 && smallest > 1; ++i) {
    const int64_t a = read(k);
    int64_t b = read(k);
    for (int spin = 0; b == a && spin < 1000; ++spin) b = read(k);
    if (b > a) smallest = std::min(smallest, b - a);
  }
  c.observed_resolution_ns = smallest == INT64_MAX ? 0.0 : static_cast<double>(smallest);

  // Call overhead: median over batches of 1000 back-to-back reads, timed on the wall clock.
  std::vector<double> per_call;
  for (int batch = 0; batch < 31; ++batch) {
    volatile int64_t sink = 0;
    const int64_t t0 = wall_now_ns();
    for (int i = 0; i < 1000; ++i) sink = sink + read(k);
    per_call.push_back(static_cast<double>(wall_now_ns() - t0) / 1000.0);
  }
  std::nth_element(per_call.begin(), per_call.begin() + 15, per_call.end());
  c.call_overhead_ns = per_call[15];
  return c;
}
}  // namespace

int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t process_cpu_now_ns() { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
int64_t thread_cpu_now_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

const char* to_string(ClockKind k) {
  switch (k) {
    case ClockKind::Wall: return "wall";
    case ClockKind::ProcessCpu: return "process_cpu";
    case ClockKind::ThreadCpu: return "thread_cpu";
  }
  return "unknown";
}

const ClockCharacteristics& clock_characteristics(ClockKind k) {
  static const ClockCharacteristics wall = measure(ClockKind::Wall);
  static const ClockCharacteristics proc = measure(ClockKind::ProcessCpu);
  static const ClockCharacteristics thread = measure(ClockKind::ThreadCpu);
  switch (k) {
    case ClockKind::Wall: return wall;
    case ClockKind::ProcessCpu: return proc;
    case ClockKind::ThreadCpu: return thread;
  }
  D5_THROW(Internal, "unknown clock kind");
}

}  // namespace d5
