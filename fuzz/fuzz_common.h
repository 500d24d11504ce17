#pragma once
// What every harness shares (docs/fuzzing.md). A harness feeds one input to a real parser entry
// point and accepts exactly the answers the parser documents for bad input: d5's typed errors
// (FormatError, IoError, InvalidArgument, Unimplemented, NotBuilt). Everything else is a finding
// that the fuzzer must report as a crash:
//   - an InternalError (it means a bug in deep500, not bad input),
//   - any other exception (std::out_of_range, nlohmann::json::type_error, std::bad_alloc...),
//     which escapes the harness and terminates the process,
//   - a sanitizer report (ASan, UBSan, LeakSanitizer), an abort, or an input slower than -timeout.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "deep500/core/error.h"

namespace d5::fuzz {

[[noreturn]] void internal_error_is_a_finding(const Error& e);

// Runs `parse(...)`; returns true when it returned, false when it refused with a documented error.
template <class F>
bool accepts(F&& parse) {
  try {
    parse();
    return true;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) internal_error_is_a_finding(e);
    return false;
  }
}

// Aborts with `what` when an accepted input broke an invariant of the parser's result: a parser
// must never turn bad input into a plausible-looking value.
void require(bool condition, const char* what);

// A file holding `data`, for parsers whose entry point is a path. One per process (libFuzzer runs
// inputs one after the other), rewritten for every input, removed at exit. `name` is the file's
// path inside the process's own temporary directory (folders are created).
std::string write_temp_file(std::span<const uint8_t> data, const std::string& name = "input");
// The process's temporary directory (created on first use, removed at exit).
const std::string& temp_dir();

// Splits the input into a leading selector byte and the rest, so one harness can drive several
// entry points (or repair a checksum before parsing) from one corpus.
struct Selected {
  uint8_t selector = 0;
  std::span<const uint8_t> rest;
};
Selected select(const uint8_t* data, size_t size);

}  // namespace d5::fuzz
