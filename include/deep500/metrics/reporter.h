#pragma once
// Reporters turn Results into text. One interface, one implementation per format.
#include <memory>
#include <ostream>
#include <string_view>

#include "deep500/metrics/results.h"

namespace d5 {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void write(const Results& results, std::ostream& out) const = 0;
};

class ConsoleReporter : public Reporter {
 public:
  void write(const Results& results, std::ostream& out) const override;
};

class JsonReporter : public Reporter {
 public:
  void write(const Results& results, std::ostream& out) const override;
};

// "console" or "json"; InvalidArgument otherwise.
std::unique_ptr<Reporter> make_reporter(std::string_view format);

// Human-readable seconds: "12.3 us", "4.56 ms", "1.23 s".
std::string format_seconds(double s);
std::string format_bytes(double bytes);

}  // namespace d5
