#pragma once
// The custom-operator cache of a test process: fresh at start, removed at exit, so every library
// a test binary compiles is built once per run and never found from an earlier one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

namespace d5::test {

inline const std::filesystem::path& custom_op_test_cache() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / fmt::format("d5-custom-op-test-{}", getpid());
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

class RemoveCustomOpTestCache : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(custom_op_test_cache()); }
};
inline const auto* const g_remove_custom_op_test_cache =
    ::testing::AddGlobalTestEnvironment(new RemoveCustomOpTestCache);

}  // namespace d5::test
