#pragma once
// What deep500 costs over the library it wraps (docs/ops-overhead.md): a backend's operator,
// called through the registry and timed by deep500's runner, against the same library called
// directly (deep500/op/native_calls.h) in a hand-written loop, in alternating rounds in one
// process so that noise and frequency changes hit both sides alike. The paper's Fig. 6 "d5 vs
// native" half.
#include <string>
#include <vector>

#include "deep500/op/operator.h"
#include "deep500/op/suites.h"

namespace d5 {

struct OverheadSettings {
  int rounds = 10;             // measured rounds (one more warms up); >= 6 for a CI of the median
  double round_seconds = 0.1;  // per side and round: sets the calls per round (5 to 500)
  double min_us = 50;          // native calls shorter than this are not compared (too short to be stable)
};

struct OverheadMeasurement {
  enum class Outcome {
    Measured,
    NoNative,        // the library has no direct call for this problem, or is not built
    OutputsDiffer,   // the two sides do not compute the same thing: no ratio can be taken
    TooShort,        // the native call takes less than min_us
  };
  Outcome outcome = Outcome::Measured;
  std::string why;  // for every outcome but Measured
  // Per measured round: median d5 time / median native time, and the two medians (seconds).
  std::vector<double> ratios, d5_seconds, native_seconds;
  std::string d5_implementation, native_implementation;
  std::string timing;          // "steady_clock" or the device clock's description
  double max_abs_difference = 0;  // between the two sides' outputs
};

// Measures one suite problem with `op` (created for it on `backend`). InvalidArgument for
// settings out of range.
OverheadMeasurement measure_op_overhead(const std::string& backend, const Problem& p, Operator& op,
                                        const OverheadSettings& settings);

// Keeps freed memory in the C library's heap (no mmap for large blocks, no trim), so that both
// sides allocate ATen's fresh results from pages already mapped: with glibc's defaults the times
// alternate between two modes with the allocation history. Returns whether it took effect.
bool keep_freed_memory();

}  // namespace d5
