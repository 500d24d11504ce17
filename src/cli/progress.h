#pragma once
// A one-line progress bar on stderr for long work: drawn only on a terminal, never under
// --format json, and never in CI (the CI environment variable), where it would only add noise
// to logs.
#include <chrono>
#include <string>

namespace d5::cli {

class Progress {
 public:
  explicit Progress(bool allowed);
  // `done` of `total` items finished; `what` is starting now.
  void update(size_t done, size_t total, const std::string& what);
  void finish();  // clears the line
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace d5::cli
