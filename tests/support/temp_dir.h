#pragma once
// A fresh directory under the system temp directory, removed with everything in it by the
// destructor. Created with mkdtemp, so concurrent tests never share one.
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace d5::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "d5-test") {
    // mkdtemp replaces the trailing XXXXXX with a unique suffix.
    std::string t = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(t.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary directory from '" + t + "': " + std::strerror(errno));
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace d5::test
