#include "deep500/core/error.h"

namespace d5 {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "InvalidArgument";
    case ErrorKind::Unimplemented: return "Unimplemented";
    case ErrorKind::NotBuilt: return "NotBuilt";
    case ErrorKind::FormatError: return "FormatError";
    case ErrorKind::IoError: return "IoError";
    case ErrorKind::Internal: return "Internal";
  }
  return "Unknown";
}

void rethrow_with_message(const Error& e, const std::string& message) {
  switch (e.kind()) {
    case ErrorKind::InvalidArgument: throw InvalidArgument(message);
    case ErrorKind::Unimplemented: throw Unimplemented(message);
    case ErrorKind::NotBuilt: throw NotBuilt(message);
    case ErrorKind::FormatError: throw FormatError(message);
    case ErrorKind::IoError: throw IoError(message);
    case ErrorKind::Internal: throw InternalError(message);
  }
  throw InternalError(message);
}

namespace detail {
void throw_error(ErrorKind kind, const std::string& message, const char* file, int line) {
  switch (kind) {
    case ErrorKind::InvalidArgument: throw InvalidArgument(message);
    case ErrorKind::Unimplemented: throw Unimplemented(message);
    case ErrorKind::NotBuilt: throw NotBuilt(message);
    case ErrorKind::FormatError: throw FormatError(message);
    case ErrorKind::IoError: throw IoError(message);
    case ErrorKind::Internal:
      // An internal error is a bug in deep500; the location helps whoever reports it.
      throw InternalError(fmt::format("{} (internal error at {}:{}; please report it)", message,
                                      file, line));
  }
  throw InternalError(message);
}
}  // namespace detail

}  // namespace d5
