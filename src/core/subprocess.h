#pragma once
// Internal: running a program without a shell (no quoting pitfalls), its output captured.
#include <string>
#include <vector>

namespace d5 {

struct ProcessResult {
  int exit_code = 0;   // 128 + the signal's number when a signal ended it
  std::string output;  // stdout and stderr, interleaved as written
};

// argv[0] is looked up on PATH. stdin is /dev/null. A parent make's flags (MAKEFLAGS, MFLAGS,
// MAKELEVEL) are left out of the environment so they cannot steer a build the program runs.
// InvalidArgument when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

// The first executable file named `program` in PATH's directories; empty when there is none.
std::string find_on_path(const std::string& program);

}  // namespace d5
