#pragma once
// Metrics of a device other than the host, read from its driver's counters (core/device_sensors.h)
// and its allocator, around timed runs: energy (the Ene column), SM clock with the readings that
// found the device throttled for power or heat, utilization (Util) and the device-memory
// high-water mark (Mem). A counter the device lacks makes its metric unavailable with the reason,
// never zero.
//
// A driver read costs far more than a short kernel (NVML takes tens of microseconds to
// milliseconds per counter), so the counters are read after a run only when `min_interval`
// seconds have passed since the metric's last read: runs of microseconds are then read every few
// thousand runs, runs longer than the interval after each. The allocator's mark is read every run.
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "deep500/core/device.h"
#include "deep500/core/device_sensors.h"
#include "deep500/metrics/metric.h"

namespace d5 {

inline constexpr double kDefaultSensorInterval = 0.01;  // seconds between two reads of the counters

// What the metrics read from a device's sensors share: the reader (or why there is none), and
// reads spaced at least `min_interval` seconds apart.
class DeviceSensorMetric : public Metric {
 public:
  void reset() override;

 protected:
  DeviceSensorMetric(Device d, double min_interval);
  // A reading when `min_interval` has passed since the last one (or `now_anyway`) and the read
  // succeeds; the time of the read attempt is then last_read_.
  std::optional<DeviceSensorReading> read_if_due(bool now_anyway = false);
  // The record of a metric with nothing to show: the sensors' reason, else `fallback`.
  MetricRecord unavailable_record(const std::string& fallback) const;

  std::string reason_;  // before sensors_, which the constructor fills it with
  std::shared_ptr<const DeviceSensors> sensors_;
  double min_interval_, last_read_ = -1;  // seconds on the wall clock; < 0: not read yet
};

// Joules per run. A GPU's energy counter advances in steps of its driver's power sampling (tens
// of milliseconds), far coarser than one kernel, so the figure is the counter's advance from
// before the first run to its last read, divided by the runs in between; it includes what runs
// between them on the device (the cache flush before each run). Each end may be off by up to one
// step, so the record carries relative_uncertainty = 2 / steps, and the series must see at least
// kMinCounterSteps steps (uncertainty at most 20 %), else the metric is unavailable and says to
// run longer (--min-time).
class DeviceEnergy : public DeviceSensorMetric {
 public:
  static constexpr int kMinCounterSteps = 10;
  explicit DeviceEnergy(Device d, double min_interval = kDefaultSensorInterval)
      : DeviceSensorMetric(d, min_interval) {}
  std::string name() const override { return "device_energy"; }
  std::string unit() const override { return "J"; }
  void begin() override;
  void end() override;
  MetricRecord result() const override;
  void reset() override;

 private:
  double first_ = -1, last_ = -1, wall_first_ = 0, wall_last_ = 0;
  int runs_ = 0, runs_read_ = 0, steps_ = 0;  // runs ended; of them, up to the last read
};

// The SM clock (MHz) at each read, and which reads found the clocks held back for power or heat:
// their count and reasons are in the record's info (throttled_readings, throttle_reasons) and
// throttle_note() says so, for the case to be marked rather than its numbers taken as they are.
class DeviceClock : public DeviceSensorMetric {
 public:
  explicit DeviceClock(Device d, double min_interval = kDefaultSensorInterval)
      : DeviceSensorMetric(d, min_interval) {}
  std::string name() const override { return "device_sm_clock"; }
  std::string unit() const override { return "MHz"; }
  void end() override;
  MetricRecord result() const override;
  void reset() override;
  int throttled_readings() const { return throttled_; }
  // "3 of 40 readings throttled (sw_power_cap)", or empty.
  std::string throttle_note() const;

 private:
  int throttled_ = 0;
  std::set<std::string> reasons_;
  double memory_clock_mhz_ = 0;
};

// The driver's utilization at each read: the share of its last sample period (1/6 s to 1 s)
// with a kernel running; with runs shorter than that period it is the busy share of the recent
// runs and the gaps between them, not of one run.
class DeviceUtilization : public DeviceSensorMetric {
 public:
  explicit DeviceUtilization(Device d, double min_interval = kDefaultSensorInterval)
      : DeviceSensorMetric(d, min_interval) {}
  std::string name() const override { return "device_utilization"; }
  std::string unit() const override { return "fraction"; }
  void end() override;
  MetricRecord result() const override;
};

// Bytes held on the device at its high-water mark during each run: tensors and operator
// workspaces from the device's caching allocator (core/device_allocator.h); memory the vendor
// libraries keep for themselves (handles, their own pools) is not in it.
class DevicePeakMemory : public Metric {
 public:
  explicit DevicePeakMemory(Device d) : device_(d) {}
  std::string name() const override { return "device_peak_memory"; }
  std::string unit() const override { return "bytes"; }
  void begin() override;
  void end() override;

 private:
  Device device_;
};

}  // namespace d5
