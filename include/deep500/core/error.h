#pragma once
// Typed errors. Every message should tell the user what to fix, not only what went wrong.
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace d5 {

// NotBuilt: a backend or library this binary was built without (rebuilding with it would work);
// Unimplemented: what no build of deep500 does, or a built backend refuses.
enum class ErrorKind { InvalidArgument, Unimplemented, NotBuilt, FormatError, IoError, Internal };

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// One subclass per kind so callers can catch exactly what they can handle.
struct InvalidArgument : Error {
  explicit InvalidArgument(const std::string& m) : Error(ErrorKind::InvalidArgument, m) {}
};
struct Unimplemented : Error {
  explicit Unimplemented(const std::string& m) : Error(ErrorKind::Unimplemented, m) {}

 protected:
  Unimplemented(ErrorKind kind, const std::string& m) : Error(kind, m) {}
};
// An Unimplemented (code that catches refusals catches it too) whose message names the build
// option or package that brings the missing part. Tests skip on it and on nothing else.
struct NotBuilt : Unimplemented {
  explicit NotBuilt(const std::string& m) : Unimplemented(ErrorKind::NotBuilt, m) {}
};
struct FormatError : Error {
  explicit FormatError(const std::string& m) : Error(ErrorKind::FormatError, m) {}
};
struct IoError : Error {
  explicit IoError(const std::string& m) : Error(ErrorKind::IoError, m) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& m) : Error(ErrorKind::Internal, m) {}
};

// Throws an error of the same kind as `e` with a new message: for adding context (which network,
// which file) to an error raised deeper down without changing how callers classify it.
[[noreturn]] void rethrow_with_message(const Error& e, const std::string& message);

namespace detail {
[[noreturn]] void throw_error(ErrorKind kind, const std::string& message, const char* file, int line);
}  // namespace detail

}  // namespace d5

// D5_CHECK(cond, kind-suffix, fmt, args...): throws d5::<kind> with a formatted message when
// cond is false. Internal errors also carry file:line because they point at a bug in deep500.
#define D5_CHECK(cond, KIND, ...)                                                        \
  do {                                                                                   \
    if (!(cond)) [[unlikely]] {                                                          \
      ::d5::detail::throw_error(::d5::ErrorKind::KIND, ::fmt::format(__VA_ARGS__), __FILE__, \
                                __LINE__);                                               \
    }                                                                                    \
  } while (0)

#define D5_CHECK_ARG(cond, ...) D5_CHECK(cond, InvalidArgument, __VA_ARGS__)
#define D5_THROW(KIND, ...) \
  ::d5::detail::throw_error(::d5::ErrorKind::KIND, ::fmt::format(__VA_ARGS__), __FILE__, __LINE__)
