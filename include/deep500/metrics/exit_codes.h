#pragma once
// Exit codes of d5 and of every process deep500 ends (docs/cli.md#exit-codes): how a run ended,
// so that a script can tell a failed validation from bad usage from a missing feature.
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"

namespace d5 {

enum ExitCode : int {
  kExitOk = 0,             // PASSED / SKIPPED / nothing to report
  kExitFailed = 1,         // a case FAILED or was MISTRUSTED, or a required VALID run was INVALID
  kExitUsage = 2,          // bad command line or InvalidArgument
  kExitUnimplemented = 3,  // UNIMPLEMENTED
  kExitIo = 4,             // IoError or FormatError (missing file, corrupt input), a lost MPI rank
  kExitInternal = 5,       // a bug in deep500
  kExitNotBuilt = 6,       // NotBuilt: a backend or library this binary was built without
  // Stopped by a signal it handled (SIGINT, SIGTERM) after saving what it had: 128 + the signal's
  // number, as shells report a process the signal ended (130 for Ctrl-C).
  kExitInterruptedBase = 128,
};

// The worst state wins: FAILED or MISTRUSTED over UNIMPLEMENTED over the rest.
int exit_code_for(const Results& results);
// The code a process ends with on an uncaught error of this kind.
int exit_code_for(ErrorKind kind);

}  // namespace d5
