#include "core/cpu_topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/sysfs_parse.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define D5_X86 1
#endif

namespace d5::detail {

namespace {

const char* kSysfsCaches = "/sys/devices/system/cpu/cpu0/cache";

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// The host as a whole, not this process's cgroup share, and without I/O devices (PCI discovery
// costs tens of milliseconds and says nothing about the CPU). Instruction caches are filtered
// out by default; a manifest lists them.
Topology load_topology(std::string* why) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    *why = fmt::format("hwloc_topology_init failed: {}", std::strerror(errno));
    return nullptr;
  }
  Topology t(raw);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) {
    *why = fmt::format("hwloc_topology_load failed: {}", std::strerror(errno));
    return nullptr;
  }
  return t;
}

std::string hwloc_version(hwloc_topology_t t) {
  const char* v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion");
  return fmt::format("hwloc {}", v ? v : "(version unknown)");
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  return n > 0 ? n : 0;
}

const char* cache_type_name(hwloc_obj_cache_type_t type) {
  switch (type) {
    case HWLOC_OBJ_CACHE_DATA: return "Data";
    case HWLOC_OBJ_CACHE_INSTRUCTION: return "Instruction";
    default: return "Unified";
  }
}

// The CPU caches above the PU that the OS calls cpu0 (memory-side caches are not CPU caches).
std::vector<CacheInfo> hwloc_caches_of_cpu0(hwloc_topology_t t) {
  std::vector<CacheInfo> caches;
  hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t, 0);
  if (!pu) pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, 0);
  for (hwloc_obj_t o = pu ? pu->parent : nullptr; o; o = o->parent) {
    if (!hwloc_obj_type_is_cache(o->type) || o->type == HWLOC_OBJ_MEMCACHE) continue;
    CacheInfo c;
    c.level = static_cast<int>(o->attr->cache.depth);
    c.type = cache_type_name(o->attr->cache.type);
    c.size_bytes = static_cast<int64_t>(o->attr->cache.size);
    c.line_bytes = static_cast<int>(o->attr->cache.linesize);
    c.shared_by_cpus = o->cpuset ? hwloc_bitmap_weight(o->cpuset) : 0;
    caches.push_back(std::move(c));
  }
  sort_in_cache_order(caches);
  return caches;
}

// hwloc reads caches from sysfs where the kernel exposes them; where it does not, its x86
// backend decodes CPUID (seen on VMs whose kernel has no cpu0/cache directory).
std::string hwloc_cache_origin() {
  std::error_code ec;
  if (std::filesystem::exists(kSysfsCaches, ec)) return "the kernel's sysfs";
#ifdef D5_X86
  return "CPUID, through hwloc's x86 backend: the kernel exposes no cpu0/cache directory";
#else
  return "the platform's description: the kernel exposes no cpu0/cache directory";
#endif
}

}  // namespace

void sort_in_cache_order(std::vector<CacheInfo>& caches) {
  const auto rank = [](const CacheInfo& c) {
    return std::pair(c.level, c.type == "Data" ? 0 : c.type == "Instruction" ? 1 : 2);
  };
  std::stable_sort(caches.begin(), caches.end(),
                   [&](const CacheInfo& a, const CacheInfo& b) { return rank(a) < rank(b); });
}

std::vector<CacheInfo> cpuid_caches([[maybe_unused]] const std::string& vendor, std::string* why) {
#ifdef D5_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned leaf = 4;
  if (vendor == "AuthenticAMD" || vendor == "HygonGenuine") {
    // AMD's copy of leaf 4 exists only with topology extensions (CPUID 0x80000001 ECX bit 22),
    // which hypervisors often hide; the older leaves 0x80000005/6 still give sizes and lines.
    leaf = 0x8000001d;
    if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !((c >> 22) & 1u)) {
      unsigned c5 = 0, d5 = 0;
      if (__get_cpuid_max(0x80000000, nullptr) < 0x80000006 || !__get_cpuid(0x80000005, &a, &b, &c5, &d5) ||
          !__get_cpuid(0x80000006, &a, &b, &c, &d)) {
        *why = "CPUID has neither leaf 0x8000001D nor leaves 0x80000005/6";
        return {};
      }
      auto caches = decode_amd_legacy_caches(c5, d5, c, d);
      if (caches.empty()) *why = "CPUID leaves 0x80000005/6 list no cache";
      return caches;
    }
  } else if (__get_cpuid_max(0, nullptr) < 4) {
    *why = "CPUID has no deterministic cache parameters (leaf 4)";
    return {};
  }
  std::vector<CacheInfo> caches;
  for (unsigned sub = 0; sub < 16 && __get_cpuid_count(leaf, sub, &a, &b, &c, &d); ++sub) {
    const auto cache = decode_cpuid_cache(a, b, c);
    if (!cache) break;
    caches.push_back(*cache);
  }
  if (caches.empty()) *why = fmt::format("CPUID leaf {:#x} lists no cache", leaf);
  sort_in_cache_order(caches);
  return caches;
#else
  *why = "CPUID exists on x86 only";
  return {};
#endif
}

void read_topology_and_caches(CpuInfo& info) {
  std::string hwloc_why;
  const Topology t = load_topology(&hwloc_why);
  if (t) {
    info.topology_source = hwloc_version(t.get());
    info.sockets = count(t.get(), HWLOC_OBJ_PACKAGE);
    info.physical_cores = count(t.get(), HWLOC_OBJ_CORE);
    info.numa_nodes = count(t.get(), HWLOC_OBJ_NUMANODE);
    info.caches = hwloc_caches_of_cpu0(t.get());
    if (!info.caches.empty()) {
      info.cache_source = fmt::format("{} (from {})", info.topology_source, hwloc_cache_origin());
      return;
    }
    hwloc_why = fmt::format("{} found no cache", info.topology_source);
  } else {
    info.topology_source = "unknown: " + hwloc_why;
  }
  std::string cpuid_why;
  info.caches = cpuid_caches(info.vendor, &cpuid_why);
  if (!info.caches.empty()) {
    info.cache_source = fmt::format("CPUID, decoded by deep500 ({})", hwloc_why);
    return;
  }
  info.caches_unavailable_reason = fmt::format("{}; {}", hwloc_why, cpuid_why);
}

}  // namespace d5::detail
