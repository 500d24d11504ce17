#include "deep500/metrics/device_metrics.h"

#include <fmt/format.h>

#include "deep500/core/device_allocator.h"
#include "deep500/metrics/timer.h"

namespace d5 {

namespace {

double now_s() { return static_cast<double>(wall_now_ns()) * 1e-9; }

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

DeviceSensorMetric::DeviceSensorMetric(Device d, double min_interval)
    : sensors_(allocator_for(d).sensors(d.index, &reason_)), min_interval_(min_interval) {}

void DeviceSensorMetric::reset() {
  Metric::reset();
  last_read_ = -1;
}

std::optional<DeviceSensorReading> DeviceSensorMetric::read_if_due(bool now_anyway) {
  if (!sensors_) return std::nullopt;
  const double t = now_s();
  if (!now_anyway && last_read_ >= 0 && t - last_read_ < min_interval_) return std::nullopt;
  last_read_ = t;
  return sensors_->read(&reason_);
}

MetricRecord DeviceSensorMetric::unavailable_record(const std::string& fallback) const {
  MetricRecord r;
  r.name = name();
  r.unit = unit();
  r.available = false;
  r.unavailable_reason = reason_.empty() ? fallback : reason_;
  return r;
}

void DeviceEnergy::reset() {
  DeviceSensorMetric::reset();
  first_ = last_ = -1;
  runs_ = runs_read_ = steps_ = 0;
}

// The series starts with the first run's begin; later begins do not read.
void DeviceEnergy::begin() {
  if (first_ >= 0 || runs_ > 0) return;
  const auto r = read_if_due(true);
  if (!r) return;
  if (!r->energy_joules) {
    reason_ = sensors_->source() + " reports no energy counter for this device";
    return;
  }
  first_ = last_ = *r->energy_joules;
  wall_first_ = wall_last_ = last_read_;
}

void DeviceEnergy::end() {
  if (first_ < 0) return;
  ++runs_;
  const auto r = read_if_due();
  if (!r || !r->energy_joules) return;
  if (*r->energy_joules != last_) ++steps_;
  last_ = *r->energy_joules;
  wall_last_ = last_read_;
  runs_read_ = runs_;
}

MetricRecord DeviceEnergy::result() const {
  if (first_ < 0 || runs_read_ == 0) return unavailable_record("no energy reading succeeded");
  const double window = wall_last_ - wall_first_;
  if (steps_ < kMinCounterSteps) {
    MetricRecord r = unavailable_record("");
    r.unavailable_reason = fmt::format("the energy counter ({}) advanced {} times in the {:.3f} s of {} runs, "
                                          "too coarse to share among them (at least {} needed); run longer "
                                          "(--min-time)",
                                          sensors_->source(), steps_, window, runs_read_, kMinCounterSteps);
    return r;
  }
  MetricRecord r;
  r.name = name();
  r.unit = unit();
  const double total = last_ - first_;
  r.samples = {total / runs_read_};
  r.summary = summarize(r.samples);
  r.info = {{"source", sensors_->source()},
            {"method", "counter advance over the series / runs (includes each run's cache flush and the gaps)"},
            {"series_joules", total},
            {"series_seconds", window},
            {"runs", runs_read_},
            {"mean_power_w", window > 0 ? total / window : 0.0},
            {"counter_steps", steps_},
            {"relative_uncertainty", 2.0 / steps_}};
  return r;
}

void DeviceClock::reset() {
  DeviceSensorMetric::reset();
  throttled_ = 0;
  reasons_.clear();
}

void DeviceClock::end() {
  const auto r = read_if_due();
  if (!r) return;
  add_sample(r->sm_clock_mhz);
  memory_clock_mhz_ = r->memory_clock_mhz;
  if (!r->throttle_reasons.empty()) {
    ++throttled_;
    reasons_.insert(r->throttle_reasons.begin(), r->throttle_reasons.end());
  }
}

std::string DeviceClock::throttle_note() const {
  if (throttled_ == 0) return "";
  return fmt::format("{} of {} readings throttled ({})", throttled_, samples_.size(), joined(reasons_));
}

MetricRecord DeviceClock::result() const {
  if (samples_.empty()) return unavailable_record("no clock reading succeeded");
  MetricRecord r = Metric::result();
  r.info = {{"source", sensors_->source()},
            {"memory_clock_mhz", memory_clock_mhz_},
            {"min_interval_s", min_interval_},
            {"throttled_readings", throttled_},
            {"throttle_reasons", std::vector<std::string>(reasons_.begin(), reasons_.end())}};
  return r;
}

void DeviceUtilization::end() {
  const auto r = read_if_due();
  if (r && r->utilization) add_sample(*r->utilization);
}

MetricRecord DeviceUtilization::result() const {
  if (samples_.empty()) return unavailable_record("the device reports no utilization");
  MetricRecord r = Metric::result();
  r.info = {{"source", sensors_->source()},
            {"period", "the driver's last sample period (1/6 s to 1 s), not one run"}};
  return r;
}

void DevicePeakMemory::begin() { allocator_for(device_).reset_peak(device_.index); }

void DevicePeakMemory::end() {
  add_sample(static_cast<double>(allocator_for(device_).stats(device_.index).peak_bytes));
}

}  // namespace d5
