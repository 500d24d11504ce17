#include "deep500/metrics/memory.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/sysfs_parse.h"

namespace d5 {

int64_t current_rss_bytes() {
  const auto statm = detail::read_text_file("/proc/self/statm");
  const auto pages = statm ? detail::statm_resident_pages(*statm) : std::nullopt;
  const long page_size = sysconf(_SC_PAGESIZE);
  if (!pages || page_size <= 0) return -1;
  return *pages * page_size;
}

int64_t peak_rss_bytes() {
  // VmHWM first: unlike ru_maxrss it honours reset_peak_rss(), so it can measure a region.
  if (const auto status = detail::read_text_file("/proc/self/status"))
    if (const auto hwm = detail::status_field_bytes(*status, "VmHWM")) return *hwm;
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0 || usage.ru_maxrss <= 0) return -1;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

bool reset_peak_rss() {
  // Plain write(2): the kernel answers EINVAL/EPERM (old kernels, locked-down containers) at
  // write time, which buffered streams would only reveal, if at all, on close.
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, "5", 1) == 1;
  return close(fd) == 0 && ok;
}

}  // namespace d5
