#pragma once
// NVIDIA's management library (NVML), loaded at run time: it ships with the driver
// (libnvidia-ml.so.1), not with the toolkit our build machines have, so the few entry points used
// are declared here and looked up with dlsym. Where it is absent, too old or fails to start, GPU
// energy, clocks and utilization are unavailable and the reason says why; nothing is made up.
//
// A sample reads, for one GPU: the energy counter (millijoules since the driver loaded), the SM
// and memory clocks, the clock event ("throttle") reasons, utilization and device memory in use.
// Two samples around a timed run give its energy and whether power or heat held its clocks back.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace d5::cuda {

struct GpuSample {
  std::optional<uint64_t> energy_mj;  // absent where the GPU has no energy counter (pre-Volta)
  unsigned sm_clock_mhz = 0, memory_clock_mhz = 0;
  uint64_t clock_event_reasons = 0;  // NVML's bit mask
  unsigned utilization_percent = 0;  // of the last sample period, kernels running
  uint64_t memory_used_bytes = 0, memory_total_bytes = 0;
};

// The reasons in a clock event mask that slow a run down: power ("sw_power_cap",
// "hw_power_brake"), heat ("sw_thermal", "hw_thermal") and "hw_slowdown". Idle, application
// clock settings, sync boost and display clocks are not throttling and are not listed.
std::vector<std::string> throttle_reasons(uint64_t mask);

class Nvml {
 public:
  // Loads `library` (empty: $D5_NVML_LIBRARY, else libnvidia-ml.so.1) and starts NVML. Null, with
  // the reason in *reason, when the library is missing, lacks an entry point, is older than NVML
  // 11, or nvmlInit fails (no driver loaded).
  static std::unique_ptr<Nvml> open(std::string* reason, const std::string& library = "");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& version() const { return version_; }         // "12.535.104"
  const std::string& driver_version() const { return driver_; }  // "535.104.05"
  // The GPU CUDA calls `pci_bus_id` ("0000:65:00.0", cudaDeviceGetPCIBusId): NVML numbers GPUs in
  // PCI order, CUDA by default fastest first, so indices are not matched.
  std::optional<GpuSample> sample(const std::string& pci_bus_id, std::string* reason) const;
  // Whether ECC is on; nullopt where the GPU has no ECC.
  std::optional<bool> ecc_enabled(const std::string& pci_bus_id) const;

 private:
  struct Api;
  Nvml() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string version_, driver_;
};

// The process's NVML, opened on first use (null with the reason when unavailable).
const Nvml* nvml(std::string* reason = nullptr);

}  // namespace d5::cuda
