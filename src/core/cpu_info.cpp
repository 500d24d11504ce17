// CPU facts for the manifest. Everything here is best effort: a fact the host does not expose
// stays at its "unknown" value (0 or empty) instead of failing the benchmark that asked.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/cpu_topology.h"
#include "core/sysfs_parse.h"
#include "deep500/core/device.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define D5_X86 1
#endif

namespace d5 {

namespace {

const std::string kCpuRoot = "/sys/devices/system/cpu/";

#ifdef D5_X86
uint64_t read_xcr0() {
  // Inline rather than _xgetbv(), which needs -mxsave for the whole translation unit.
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::vector<std::string> x86_isa() {
  detail::X86CpuidWords w;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return {};
  w.leaf1_ecx = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    w.has_leaf7 = true;
    w.leaf7_ebx = b;
    w.leaf7_ecx = c;
    w.leaf7_edx = d;
    const unsigned max_subleaf = a;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) w.leaf7_1_eax = a;
  }
  const bool osxsave = (w.leaf1_ecx >> 27) & 1u;
  return detail::x86_usable_isa(w, osxsave ? read_xcr0() : 0);
}
#endif

void read_identity(CpuInfo& info, const std::string& cpuinfo) {
  auto field = [&](std::string_view key) {
    return detail::cpuinfo_field(cpuinfo, key).value_or("");
  };
  info.vendor = field("vendor_id");
  info.model = field("model name");
  // arm64 kernels print neither; the implementer/part codes are what they do give.
  if (info.vendor.empty()) info.vendor = field("CPU implementer");
  if (info.model.empty()) info.model = field("Hardware");
  if (info.model.empty() && !field("CPU part").empty()) info.model = "part " + field("CPU part");

  utsname u{};
  if (uname(&u) == 0) info.architecture = u.machine;
}

void read_isa(CpuInfo& info, [[maybe_unused]] const std::string& cpuinfo) {
#ifdef D5_X86
  info.isa = x86_isa();
#else
  // Elsewhere the kernel's list is the best available; it already omits what it disabled.
  auto flags = detail::cpuinfo_field(cpuinfo, "flags");
  if (!flags) flags = detail::cpuinfo_field(cpuinfo, "Features");
  if (flags) info.isa = detail::split_words(*flags);
#endif
}

void read_frequency(CpuInfo& info, const std::string& cpuinfo) {
  if (const auto khz = detail::read_int_file(kCpuRoot + "cpu0/cpufreq/cpuinfo_max_freq")) {
    info.max_mhz = static_cast<double>(*khz) / 1000.0;
    return;
  }
  // Without cpufreq (most VMs) the kernel's own clock estimate is the only number there is;
  // better recorded than unknown, since it still tells hosts apart.
  if (const auto mhz = detail::cpuinfo_field(cpuinfo, "cpu MHz")) {
    char* end = nullptr;
    const double v = std::strtod(mhz->c_str(), &end);
    if (end != mhz->c_str() && v > 0) info.max_mhz = v;
  }
}

CpuInfo probe_cpu() {
  CpuInfo info;
  const std::string cpuinfo = detail::read_text_file("/proc/cpuinfo").value_or("");
  read_identity(info, cpuinfo);
  read_isa(info, cpuinfo);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  info.logical_cores = online > 0 ? static_cast<int>(online) : 0;
  detail::read_topology_and_caches(info);
  read_frequency(info, cpuinfo);
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) info.memory_bytes = static_cast<int64_t>(pages) * page_size;
  return info;
}

}  // namespace

bool CpuInfo::has(const std::string& flag) const {
  return std::find(isa.begin(), isa.end(), flag) != isa.end();
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = probe_cpu();
  return info;
}

}  // namespace d5
