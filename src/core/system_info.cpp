#include "deep500/core/system_info.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "core/sysfs_parse.h"
#include "deep500/core/error.h"

extern char** environ;  // POSIX leaves declaring it to the program

namespace d5 {

namespace {

OsInfo probe_os() {
  OsInfo os;
  utsname u{};
  if (uname(&u) == 0) {
    os.name = u.sysname;
    os.kernel = u.release;
    os.kernel_version = u.version;
    os.machine = u.machine;
    os.hostname = u.nodename;
  }
  // /usr/lib/os-release is the fallback os-release(5) itself names for images without /etc.
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"}) {
    const auto text = detail::read_text_file(path);
    if (!text) continue;
    if (auto pretty = detail::os_release_field(*text, "PRETTY_NAME"); pretty && !pretty->empty())
      os.name = std::move(*pretty);
    break;
  }
  // uname truncates the node name at 64 bytes; gethostname is the documented source.
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0 && host[0] != '\0') os.hostname = host.data();
  return os;
}

bool is_relevant(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {"OMP_",  "MKL_",    "DNNL_",   "ONEDNN_",
                                                   "OMPI_", "KMP_",    "GOMP_",   "CUBLAS_",
                                                   "CUDNN_", "TORCH_", "D5_"};
  if (name == "CUDA_VISIBLE_DEVICES") return true;
  for (const auto prefix : kPrefixes)
    if (name.starts_with(prefix)) return true;
  return false;
}

}  // namespace

const OsInfo& os_info() {
  static const OsInfo info = probe_os();
  return info;
}

std::map<std::string, std::string> relevant_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    if (is_relevant(entry.substr(0, eq)))
      env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto ms = duration_cast<milliseconds>(t - secs).count();
  const time_t tt = system_clock::to_time_t(secs);
  tm utc{};
  D5_CHECK_ARG(gmtime_r(&tt, &utc) != nullptr,
               "time {} s since 1970 is outside the calendar range", static_cast<long long>(tt));
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms);
}

std::string utc_now_iso8601() { return iso8601_utc(std::chrono::system_clock::now()); }

}  // namespace d5
