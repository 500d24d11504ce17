#pragma once
// Clocks for measurements. Wall time is std::chrono::steady_clock; CPU time is the process or
// calling thread's CPU clock (clock_gettime). All in nanoseconds.
#include <cstdint>

namespace d5 {

int64_t wall_now_ns();
int64_t process_cpu_now_ns();
int64_t thread_cpu_now_ns();

enum class ClockKind { Wall, ProcessCpu, ThreadCpu };
const char* to_string(ClockKind k);

// Measured once per process (first call), then cached, and recorded in every manifest.
struct ClockCharacteristics {
  double reported_resolution_ns;  // clock_getres
  double observed_resolution_ns;  // smallest non-zero difference between consecutive reads
  double call_overhead_ns;        // median cost of one read
};
const ClockCharacteristics& clock_characteristics(ClockKind k);

}  // namespace d5
