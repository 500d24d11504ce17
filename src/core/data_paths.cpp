#include "deep500/core/data_paths.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#ifndef D5_INSTALL_LIBDIR
#define D5_INSTALL_LIBDIR "lib"
#endif

namespace d5 {

namespace {
namespace fs = std::filesystem;

// PREFIX of an installed tree whose executable is running: it lives in PREFIX/bin.
fs::path executable_prefix() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path();
}

// PREFIX of the installed libdeep500 this code was loaded from (PREFIX/LIBDIR/libdeep500.so), for
// the programs that link it from elsewhere: a user's own executable, or Python, whose package
// carries an installed tree of its own. Empty when this code is not in a library in a LIBDIR.
fs::path library_prefix() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&locate_data), &info) == 0 || info.dli_fname == nullptr ||
      info.dli_fname[0] == '\0')
    return {};
  std::error_code ec;
  const fs::path library = fs::canonical(info.dli_fname, ec);
  if (ec) return {};
  fs::path dir = library.parent_path();
  const fs::path libdir(D5_INSTALL_LIBDIR);
  const std::vector<fs::path> parts(libdir.begin(), libdir.end());
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    if (dir.filename() != *part) return {};
    dir = dir.parent_path();
  }
  return dir;
}
}  // namespace

std::string locate_data(const char* env_var, const std::string& source_default, const std::string& installed_relative) {
  if (const char* v = std::getenv(env_var); v && *v) return v;
  std::error_code ec;
  // An installed d5 reads its installed data even where the sources it was built from still lie.
  for (const fs::path& prefix : {executable_prefix(), library_prefix()}) {
    if (prefix.empty()) continue;
    const fs::path installed = prefix / installed_relative;
    if (fs::exists(installed, ec)) return installed.string();
  }
  return source_default;
}

}  // namespace d5
