#pragma once
// Descriptions of the compute devices a result was measured on.
#include <cstdint>
#include <string>
#include <vector>

namespace d5 {

enum class DeviceKind : int32_t { cpu = 0, cuda = 1 };

// Where a tensor's buffer lives. Tensors allocated by deep500 itself are host memory.
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int32_t index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int32_t i) { return {DeviceKind::cuda, i}; }
  std::string to_string() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

struct CacheInfo {
  int level = 0;
  std::string type;  // Data, Instruction, Unified
  int64_t size_bytes = 0;
  int line_bytes = 0;
  int shared_by_cpus = 0;
};

struct CpuInfo {
  std::string vendor;
  std::string model;
  std::string architecture;        // x86_64, aarch64, ...
  std::vector<std::string> isa;    // e.g. sse4_2 avx avx2 fma avx512f ... amx_tile (usable, not only present)
  int logical_cores = 0;
  int physical_cores = 0;          // 0 when it cannot be determined
  int sockets = 0;
  int numa_nodes = 0;              // 0 when it cannot be determined
  std::string topology_source;     // "hwloc 2.9.0", or why topology is unknown
  double max_mhz = 0;              // 0 when unknown
  std::vector<CacheInfo> caches;   // of cpu0, by level (L1d before L1i)
  std::string cache_source;        // where `caches` came from; empty when there are none
  std::string caches_unavailable_reason;  // why `caches` is empty (set exactly then)
  int64_t memory_bytes = 0;        // physical memory of the host
  bool has(const std::string& flag) const;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  double clock_mhz = 0;  // the SM clock's maximum
  std::string driver_version;
  std::string pci_bus_id;  // "0000:65:00.0"
  // From NVML when the driver's library loads (nvml says which version, or why not): ECC "on",
  // "off" or "unsupported"; the SM and memory clocks when the GPU was enumerated (0: unknown).
  std::string nvml;
  std::string ecc;
  double sm_clock_mhz_at_start = 0, memory_clock_mhz_at_start = 0;
};

// Read once and cached; cheap to call.
const CpuInfo& cpu_info();

// GPUs are enumerated by the CUDA backend when it is built; it installs the enumerator at
// registration. Without it the list is empty and gpu_info's unavailable_reason says why.
using GpuEnumerator = std::vector<GpuInfo> (*)(std::string* unavailable_reason);
void set_gpu_enumerator(GpuEnumerator e);
std::vector<GpuInfo> gpu_info(std::string* unavailable_reason = nullptr);

}  // namespace d5
