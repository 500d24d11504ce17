#pragma once
// A case's metric by name; a missing one fails the test that asked for it (as an exception, so
// that no assertion reads a default record).
#include <stdexcept>
#include <string>

#include "deep500/metrics/results.h"

namespace d5::test {

inline const MetricRecord& case_metric(const CaseResult& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return m;
  throw std::runtime_error("case '" + c.name + "' has no metric " + name);
}

}  // namespace d5::test
