#include "deep500/core/data_paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace d5 {

namespace {
namespace fs = std::filesystem;

// PREFIX of an installed tree: the executable lives in PREFIX/bin.
fs::path install_prefix() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path();
}
}  // namespace

std::string locate_data(const char* env_var, const std::string& source_default, const std::string& installed_relative) {
  if (const char* v = std::getenv(env_var); v && *v) return v;
  std::error_code ec;
  // An installed d5 reads its installed data even where the sources it was built from still lie.
  const fs::path prefix = install_prefix();
  if (!prefix.empty()) {
    const fs::path installed = prefix / installed_relative;
    if (fs::exists(installed, ec)) return installed.string();
  }
  return source_default;
}

}  // namespace d5
