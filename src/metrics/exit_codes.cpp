#include "deep500/metrics/exit_codes.h"

namespace d5 {

int exit_code_for(const Results& results) {
  int code = kExitOk;
  for (const auto& c : results.cases) {
    switch (c.state) {
      case CaseState::Failed:
      case CaseState::Mistrusted: code = kExitFailed; break;
      case CaseState::Unimplemented:
        if (code == kExitOk) code = kExitUnimplemented;
        break;
      default: break;
    }
  }
  return code;
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return kExitUsage;
    case ErrorKind::Unimplemented: return kExitUnimplemented;
    case ErrorKind::NotBuilt: return kExitNotBuilt;
    case ErrorKind::FormatError:
    case ErrorKind::IoError: return kExitIo;
    case ErrorKind::Internal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace d5
