#include "deep500/metrics/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "deep500/core/error.h"

namespace d5 {

namespace {
std::string os_error() { return std::strerror(errno); }

// Returns whether the data reached the disk; false with errno set otherwise.
bool fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return false;
  const bool synced = ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return synced;
}
}  // namespace

void atomic_write(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  D5_CHECK(fs::is_directory(dir), IoError, "cannot write '{}': directory '{}' does not exist", path,
           dir.string());

  std::string tmpl = (dir / fmt::format(".{}.tmp.XXXXXX", target.filename().string())).string();
  const int fd = ::mkstemp(tmpl.data());
  D5_CHECK(fd >= 0, IoError, "cannot create a temporary file next to '{}': {}", path, os_error());
  ::close(fd);

  try {
    {
      std::ofstream out(tmpl, std::ios::binary | std::ios::trunc);
      D5_CHECK(out.good(), IoError, "cannot open '{}' for writing: {}", tmpl, os_error());
      writer(out);
      out.flush();
      D5_CHECK(out.good(), IoError, "writing '{}' failed (disk full?): {}", tmpl, os_error());
    }
    // Data on disk before the rename makes it visible; otherwise a power loss could leave an
    // empty file under the final name.
    // Filesystems that allocate late (ext4, XFS, NFS) may report a full disk only here.
    D5_CHECK(fsync_path(tmpl, O_RDONLY), IoError, "writing '{}' failed (disk full?): {}", tmpl, os_error());
    D5_CHECK(::rename(tmpl.c_str(), path.c_str()) == 0, IoError, "cannot rename '{}' to '{}': {}",
             tmpl, path, os_error());
    // Best effort: some filesystems refuse to open or sync a directory, and the file is in place.
    fsync_path(dir.string(), O_RDONLY | O_DIRECTORY);
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
}

void atomic_write(const std::string& path, std::string_view content) {
  atomic_write(path, [&](std::ostream& out) { out.write(content.data(), static_cast<std::streamsize>(content.size())); });
}

}  // namespace d5
