// Consecutive runs of a case compared as `d5 compare` compares two files (docs/db.md#regressions).
#include "deep500/history/result_db.h"

namespace d5 {

std::vector<RunPair> consecutive_pairs(const std::vector<DbMeasurement>& ordered, const CompareOptions& options) {
  std::vector<RunPair> pairs;
  const DbMeasurement* previous = nullptr;
  for (const DbMeasurement& m : ordered) {
    if (m.samples.empty()) continue;
    const bool same_series = previous && previous->case_name == m.case_name && previous->backend == m.backend &&
                             previous->metric == m.metric && previous->machine == m.machine;
    if (same_series) {
      const Direction direction =
          options.direction != Direction::Unknown ? options.direction : direction_for_unit(m.unit);
      RunPair p{*previous, m, compare_samples(previous->samples, m.samples, direction, options)};
      p.comparison.key = m.backend.empty() ? m.case_name : m.case_name + " @ " + m.backend;
      p.comparison.metric = m.metric;
      p.comparison.unit = m.unit;
      pairs.push_back(std::move(p));
    }
    previous = &m;
  }
  return pairs;
}

}  // namespace d5
