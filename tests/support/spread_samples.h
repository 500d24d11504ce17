#pragma once
// Deterministic timing samples for tests of comparisons: spread 5 % around `median`, no two equal;
// another `phase` gives another draw of the same distribution.
#include <cmath>
#include <vector>

namespace d5::test {

inline std::vector<double> spread_samples(double median, int n, double phase) {
  std::vector<double> s;
  for (int i = 0; i < n; ++i) s.push_back(median * (1 + 0.05 * std::sin(1.7 * i + phase)));
  return s;
}

}  // namespace d5::test
