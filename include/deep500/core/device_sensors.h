#pragma once
// What a device's driver reports about it while work runs: its energy counter, clocks, the
// reasons it holds its clocks back, and how busy it was. A device kind that has such counters
// (CUDA through NVML) hands out a reader from its allocator (DeviceAllocator::sensors); the host
// has none here (its energy is RAPL's, metrics/energy.h). Nothing in a reading is estimated: a
// counter the device lacks is absent.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace d5 {

struct DeviceSensorReading {
  std::optional<double> energy_joules;  // a counter since the driver started; absent without one
  double sm_clock_mhz = 0, memory_clock_mhz = 0;
  // Why the clocks are held back now, power or heat only ("sw_power_cap", "hw_thermal", ...);
  // idle and application clock settings are not throttling and are not listed.
  std::vector<std::string> throttle_reasons;
  // Share of the driver's last sample period (1/6 s to 1 s on NVIDIA GPUs) in which a kernel ran.
  std::optional<double> utilization;
};

class DeviceSensors {
 public:
  virtual ~DeviceSensors() = default;
  // Where the readings come from ("NVML 12.580.159.04"), for the records.
  virtual std::string source() const = 0;
  // Null, with the reason in *reason, when the device cannot be read now.
  virtual std::optional<DeviceSensorReading> read(std::string* reason) const = 0;
};

}  // namespace d5
