#include "nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <type_traits>

namespace d5::cuda {

namespace {

// NVML's C types, as its header declares them (nvml.h is not installed on our build machines).
using Ret = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using DeviceHandle = struct NvmlDevice*;
struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
constexpr int kClockSm = 1, kClockMemory = 2;  // nvmlClockType_t
constexpr int kEnableStateEnabled = 1;         // nvmlEnableState_t

// nvmlClocksEventReasons bits.
constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                   kHwPowerBrake = 0x80;

}  // namespace

struct Nvml::Api {
  Ret (*init)();
  Ret (*shutdown)();
  const char* (*error_string)(Ret);
  Ret (*system_version)(char*, unsigned);
  Ret (*driver_version)(char*, unsigned);
  Ret (*handle_by_pci)(const char*, DeviceHandle*);
  Ret (*energy)(DeviceHandle, unsigned long long*);
  Ret (*clock)(DeviceHandle, int, unsigned*);
  Ret (*event_reasons)(DeviceHandle, unsigned long long*);
  Ret (*utilization)(DeviceHandle, Utilization*);
  Ret (*memory)(DeviceHandle, Memory*);
  Ret (*ecc_mode)(DeviceHandle, int*, int*);

  std::string error(Ret r) const { return error_string ? error_string(r) : fmt::format("NVML error {}", r); }
};

std::vector<std::string> throttle_reasons(uint64_t mask) {
  std::vector<std::string> out;
  if (mask & kSwPowerCap) out.emplace_back("sw_power_cap");
  if (mask & kHwPowerBrake) out.emplace_back("hw_power_brake");
  if (mask & kSwThermal) out.emplace_back("sw_thermal");
  if (mask & kHwThermal) out.emplace_back("hw_thermal");
  if (mask & kHwSlowdown) out.emplace_back("hw_slowdown");
  return out;
}

std::unique_ptr<Nvml> Nvml::open(std::string* reason, const std::string& library) {
  auto fail = [&](std::string why) -> std::unique_ptr<Nvml> {
    if (reason) *reason = std::move(why);
    return nullptr;
  };
  std::string path = library;
  if (path.empty()) {
    const char* env = std::getenv("D5_NVML_LIBRARY");
    path = env && *env ? env : "libnvidia-ml.so.1";
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fail(fmt::format("NVML unavailable: cannot load {} ({}); it comes with the NVIDIA driver", path, dlerror()));
  std::unique_ptr<Nvml> n(new Nvml());
  n->handle_ = handle;
  n->api_ = std::make_unique<Api>();
  Api& a = *n->api_;
  std::string missing;
  auto need = [&](auto& fn, const char* name, const char* older = nullptr) {
    void* sym = dlsym(handle, name);
    if (!sym && older) sym = dlsym(handle, older);
    if (!sym) missing += (missing.empty() ? "" : ", ") + std::string(name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
  need(a.init, "nvmlInit_v2");
  need(a.shutdown, "nvmlShutdown");
  need(a.error_string, "nvmlErrorString");
  need(a.system_version, "nvmlSystemGetNVMLVersion");
  need(a.driver_version, "nvmlSystemGetDriverVersion");
  need(a.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  need(a.energy, "nvmlDeviceGetTotalEnergyConsumption");
  need(a.clock, "nvmlDeviceGetClockInfo");
  // Renamed in NVML 12; drivers keep the old name too.
  need(a.event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
  need(a.utilization, "nvmlDeviceGetUtilizationRates");
  need(a.memory, "nvmlDeviceGetMemoryInfo");
  need(a.ecc_mode, "nvmlDeviceGetEccMode");
  if (!missing.empty()) return fail(fmt::format("NVML unavailable: {} lacks {}", path, missing));
  if (const Ret r = a.init(); r != 0) {
    a.shutdown = nullptr;  // nothing to shut down
    return fail(fmt::format("NVML unavailable: nvmlInit failed: {}", a.error(r)));
  }
  char buf[96] = {};
  if (a.system_version(buf, sizeof buf) == 0) n->version_ = buf;
  if (a.driver_version(buf, sizeof buf) == 0) n->driver_ = buf;
  const int major = std::atoi(n->version_.c_str());
  if (major < 11)
    return fail(fmt::format("NVML unavailable: version '{}' of {} is older than 11", n->version_, path));
  return n;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (handle_) dlclose(handle_);
}

std::optional<GpuSample> Nvml::sample(const std::string& pci_bus_id, std::string* reason) const {
  const Api& a = *api_;
  DeviceHandle dev = nullptr;
  if (const Ret r = a.handle_by_pci(pci_bus_id.c_str(), &dev); r != 0) {
    if (reason) *reason = fmt::format("NVML has no GPU at PCI {}: {}", pci_bus_id, a.error(r));
    return std::nullopt;
  }
  GpuSample s;
  unsigned long long mj = 0;
  if (a.energy(dev, &mj) == 0) s.energy_mj = mj;
  a.clock(dev, kClockSm, &s.sm_clock_mhz);
  a.clock(dev, kClockMemory, &s.memory_clock_mhz);
  unsigned long long reasons = 0;
  if (a.event_reasons(dev, &reasons) == 0) s.clock_event_reasons = reasons;
  Utilization u{};
  if (a.utilization(dev, &u) == 0) s.utilization_percent = u.gpu;
  Memory m{};
  if (a.memory(dev, &m) == 0) {
    s.memory_used_bytes = m.used;
    s.memory_total_bytes = m.total;
  }
  return s;
}

std::optional<bool> Nvml::ecc_enabled(const std::string& pci_bus_id) const {
  DeviceHandle dev = nullptr;
  int current = 0, pending = 0;
  if (api_->handle_by_pci(pci_bus_id.c_str(), &dev) != 0 || api_->ecc_mode(dev, &current, &pending) != 0)
    return std::nullopt;
  return current == kEnableStateEnabled;
}

const Nvml* nvml(std::string* reason) {
  static std::string why;
  static std::unique_ptr<Nvml> instance = Nvml::open(&why);
  if (!instance && reason) *reason = why;
  return instance.get();
}

}  // namespace d5::cuda
