#pragma once
// The PyTorch side of a twin test (docs/building.md#twins). The twin script is deterministic on
// the generated data, the seed and its options, so its figure is recorded from a full run beside
// each test; `make test` (and CI) compares d5's fresh figure with that record, and spends its
// minutes on d5's side, the side a change to d5 can move. D5_TWINS=full (`make test-twins`) reruns
// the PyTorch side as well, to renew the record after the data, the script or PyTorch change.
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

namespace d5::test {

inline bool rerun_twins() {
  const char* v = std::getenv("D5_TWINS");
  return v != nullptr && std::string(v) == "full";
}

// The twin's figure: run() under D5_TWINS=full, else `recorded`, saying which on stdout.
inline double twin_figure(const std::string& what, double recorded, const std::function<double()>& run) {
  if (rerun_twins()) return run();
  std::cout << what << ": the PyTorch twin's recorded " << recorded << " (D5_TWINS=full reruns it)\n";
  return recorded;
}

}  // namespace d5::test
