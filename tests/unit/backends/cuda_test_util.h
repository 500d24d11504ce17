#pragma once
// GPU tests skip, with the reason, where no CUDA device can be used (ctest lists them as
// skipped); the tests that run there check the refusals instead.
#include <gtest/gtest.h>

#include <string>

#include "deep500/backends/builtin.h"
#include "deep500/core/device.h"

namespace d5::test {

// Empty when a CUDA device is usable, else why not.
inline std::string no_gpu_reason() {
  register_builtin_backends();
  std::string reason;
  if (!gpu_info(&reason).empty()) return "";
  return reason.empty() ? "no CUDA device" : reason;
}

}  // namespace d5::test

#define D5_REQUIRE_GPU()                                                    \
  do {                                                                      \
    const std::string why = ::d5::test::no_gpu_reason();                    \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;            \
  } while (0)
