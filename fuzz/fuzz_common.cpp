#include "fuzz_common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace d5::fuzz {

namespace fs = std::filesystem;

void internal_error_is_a_finding(const Error& e) {
  std::fprintf(stderr, "FINDING: InternalError (a bug in deep500, not a refusal of bad input): %s\n", e.what());
  std::abort();
}

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "FINDING: an accepted input broke an invariant: %s\n", what);
  std::abort();
}

namespace {
void remove_temp_dir() {
  std::error_code ec;
  fs::remove_all(temp_dir(), ec);
}
}  // namespace

const std::string& temp_dir() {
  static const std::string dir = [] {
    // TMPDIR when set (scripts/run-fuzzers.sh points it at /dev/shm), else the system's.
    // mkdtemp's template: it replaces the six trailing X with a unique suffix.
    std::string pattern = (fs::temp_directory_path() / "d5fuzz.XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      std::perror("d5 fuzz: mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  static const bool registered = (std::atexit(remove_temp_dir), true);
  (void)registered;
  return dir;
}

std::string write_temp_file(std::span<const uint8_t> data, const std::string& name) {
  const std::string path = temp_dir() + "/" + name;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "d5 fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

Selected select(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  return {data[0], std::span<const uint8_t>(data + 1, size - 1)};
}

}  // namespace d5::fuzz
