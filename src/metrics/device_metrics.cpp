#include "deep500/metrics/device_metrics.h"

#include <fmt/format.h>

#include "deep500/core/device_allocator.h"
#include "deep500/metrics/timer.h"

namespace d5 {

namespace {

std::shared_ptr<const DeviceSensors> sensors_of(Device d, std::string* reason) {
  return allocator_for(d).sensors(d.index, reason);
}

MetricRecord unavailable(const Metric& m, std::string reason) {
  MetricRecord r;
  r.name = m.name();
  r.unit = m.unit();
  r.available = false;
  r.unavailable_reason = std::move(reason);
  return r;
}

double now_s() { return static_cast<double>(wall_now_ns()) * 1e-9; }

// Whether a metric that last read at `last` (< 0: never) may read again now.
bool due(double& last, double interval) {
  const double t = now_s();
  if (last >= 0 && t - last < interval) return false;
  last = t;
  return true;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

DeviceEnergy::DeviceEnergy(Device d, double min_interval)
    : sensors_(sensors_of(d, &reason_)), min_interval_(min_interval) {}

void DeviceEnergy::reset() {
  Metric::reset();
  first_ = last_ = -1;
  runs_ = runs_read_ = steps_ = 0;
}

void DeviceEnergy::begin() {
  if (!sensors_ || runs_ > 0) return;
  const auto r = sensors_->read(&reason_);
  if (!r) return;
  if (!r->energy_joules) {
    reason_ = sensors_->source() + " reports no energy counter for this device";
    return;
  }
  first_ = last_ = *r->energy_joules;
  wall_first_ = wall_last_ = now_s();
}

void DeviceEnergy::end() {
  if (!sensors_ || first_ < 0) return;
  ++runs_;
  if (now_s() - wall_last_ < min_interval_) return;
  const auto r = sensors_->read(&reason_);
  if (!r || !r->energy_joules) return;
  if (*r->energy_joules != last_) ++steps_;
  last_ = *r->energy_joules;
  wall_last_ = now_s();
  runs_read_ = runs_;
}

MetricRecord DeviceEnergy::result() const {
  if (!sensors_) return unavailable(*this, reason_);
  if (first_ < 0 || runs_read_ == 0)
    return unavailable(*this, reason_.empty() ? "no energy reading succeeded" : reason_);
  const double window = wall_last_ - wall_first_;
  if (steps_ < kMinCounterSteps)
    return unavailable(*this, fmt::format("the energy counter ({}) advanced {} times in the {:.3f} s of {} runs, "
                                          "too coarse to share among them (at least {} needed); run longer "
                                          "(--min-time)",
                                          sensors_->source(), steps_, window, runs_read_, kMinCounterSteps));
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

DeviceClock::DeviceClock(Device d, double min_interval)
    : sensors_(sensors_of(d, &reason_)), min_interval_(min_interval) {}

void DeviceClock::reset() {
  Metric::reset();
  throttled_ = 0;
  last_read_ = -1;
  reasons_.clear();
}

void DeviceClock::end() {
  if (!sensors_ || !due(last_read_, min_interval_)) return;
  const auto r = sensors_->read(&reason_);
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
  if (!sensors_) return unavailable(*this, reason_);
  if (samples_.empty()) return unavailable(*this, reason_.empty() ? "no clock reading succeeded" : reason_);
  MetricRecord r = Metric::result();
  r.info = {{"source", sensors_->source()},
            {"memory_clock_mhz", memory_clock_mhz_},
            {"min_interval_s", min_interval_},
            {"throttled_readings", throttled_},
            {"throttle_reasons", std::vector<std::string>(reasons_.begin(), reasons_.end())}};
  return r;
}

DeviceUtilization::DeviceUtilization(Device d, double min_interval)
    : sensors_(sensors_of(d, &reason_)), min_interval_(min_interval) {}

void DeviceUtilization::reset() {
  Metric::reset();
  last_read_ = -1;
}

void DeviceUtilization::end() {
  if (!sensors_ || !due(last_read_, min_interval_)) return;
  const auto r = sensors_->read(&reason_);
  if (r && r->utilization) add_sample(*r->utilization);
}

MetricRecord DeviceUtilization::result() const {
  if (!sensors_) return unavailable(*this, reason_);
  if (samples_.empty()) return unavailable(*this, reason_.empty() ? "the device reports no utilization" : reason_);
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
