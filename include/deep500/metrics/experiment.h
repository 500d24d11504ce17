#pragma once
// The settings of one experiment, every seed included, in one struct (MLPerf LoadGen style).
// All randomness derives from (seed, stream name), so the manifest can record it completely.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "deep500/core/rng.h"
#include "deep500/metrics/runner.h"

namespace d5 {

struct ExperimentSettings {
  uint64_t seed = 0x5eed;     // master seed
  int threads = 0;            // 0 = library defaults
  bool deterministic = false;
  RunSettings run;

  // The RNG stream for a named consumer; the name is recorded for the manifest.
  RngStream stream(std::string_view name) {
    streams_used.emplace(name);
    return RngStream(seed, name);
  }
  std::set<std::string> streams_used;
};

}  // namespace d5
