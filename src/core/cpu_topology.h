#pragma once
// Internal: the host's topology (sockets, cores, NUMA nodes) and cpu0's caches, for cpu_info().
#include "deep500/core/device.h"

namespace d5::detail {

// Fills physical_cores, sockets, numa_nodes, topology_source, caches, cache_source and
// caches_unavailable_reason. hwloc first (it reads sysfs, CPUID or the device tree, whichever
// the platform offers); CPUID directly when hwloc finds no cache; otherwise the reason.
void read_topology_and_caches(CpuInfo& info);

// The caches CPUID describes (leaf 4, or 0x8000001D on AMD and Hygon), in cache_order; empty
// with *why set when this CPU or architecture has no such leaf.
std::vector<CacheInfo> cpuid_caches(const std::string& vendor, std::string* why);

// Kernel index order: by level, data before instruction before unified.
void sort_in_cache_order(std::vector<CacheInfo>& caches);

}  // namespace d5::detail
