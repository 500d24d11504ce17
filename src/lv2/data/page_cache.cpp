// Page cache control and inspection for dataset files (docs/data-bench.md).
#include "deep500/train/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "deep500/core/error.h"

namespace d5 {

namespace fs = std::filesystem;

std::vector<std::string> dataset_files(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  D5_CHECK(!ec && fs::exists(status), IoError, "'{}' does not exist", path);
  if (fs::is_regular_file(status)) return {path};
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec))
    if (e.is_regular_file()) files.push_back(e.path().string());
  D5_CHECK(!ec, IoError, "cannot list '{}': {}", path, ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

void drop_from_page_cache(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  D5_CHECK(fd >= 0, IoError, "cannot open '{}': {}", file, std::strerror(errno));
  // A dirty page cannot be dropped: written data must reach the device first.
  ::fdatasync(fd);
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  D5_CHECK(rc == 0, IoError, "posix_fadvise(DONTNEED) on '{}' failed: {}", file, std::strerror(rc));
}

PageCacheResidency page_cache_residency(const std::vector<std::string>& files) {
  PageCacheResidency r;
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec;
  for (const auto& file : files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    D5_CHECK(fd >= 0, IoError, "cannot open '{}': {}", file, std::strerror(errno));
    const off_t size = ::lseek(fd, 0, SEEK_END);
    if (size <= 0) {
      ::close(fd);
      continue;
    }
    void* map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    D5_CHECK(map != MAP_FAILED, IoError, "cannot map '{}': {}", file, std::strerror(errno));
    const uint64_t pages = (static_cast<uint64_t>(size) + page - 1) / page;
    vec.assign(pages, 0);
    const int rc = ::mincore(map, static_cast<size_t>(size), vec.data());
    ::munmap(map, static_cast<size_t>(size));
    D5_CHECK(rc == 0, IoError, "mincore on '{}' failed: {}", file, std::strerror(errno));
    r.pages += pages;
    r.resident_pages += static_cast<uint64_t>(std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
  }
  return r;
}

}  // namespace d5
