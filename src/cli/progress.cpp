#include "progress.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

namespace d5::cli {

Progress::Progress(bool allowed)
    : enabled_(allowed && isatty(STDERR_FILENO) != 0 && std::getenv("CI") == nullptr),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(size_t done, size_t total, const std::string& what) {
  if (!enabled_ || total == 0) return;
  constexpr int kWidth = 24;
  const auto filled = static_cast<int>(kWidth * done / total);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The remaining time assumes the rest takes as long per item as the finished ones.
  const std::string eta =
      done > 0 && done < total ? fmt::format(", ~{:.0f} s left", elapsed / static_cast<double>(done) *
                                                                     static_cast<double>(total - done))
                               : "";
  std::string line = fmt::format("[{}{}] {}/{} {:.0f} s{}  {}", std::string(static_cast<size_t>(filled), '#'),
                                 std::string(static_cast<size_t>(kWidth - filled), '.'), done, total, elapsed, eta,
                                 what);
  if (line.size() > 110) line.resize(110);
  std::cerr << "\r\033[K" << line << std::flush;
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) std::cerr << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace d5::cli
