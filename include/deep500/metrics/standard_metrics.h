#pragma once
// Metrics every level can use. Each is a Metric; compose them in a MetricSet.
#include <string>
#include <vector>

#include "deep500/metrics/energy.h"
#include "deep500/metrics/metric.h"
#include "deep500/metrics/timer.h"

namespace d5 {

// Seconds per run on the wall (steady) clock.
class WallTime : public Metric {
 public:
  std::string name() const override { return "wall_time"; }
  std::string unit() const override { return "s"; }
  void begin() override { start_ = wall_now_ns(); }
  void end() override { add_sample(static_cast<double>(wall_now_ns() - start_) * 1e-9); }
  MetricRecord result() const override;

 private:
  int64_t start_ = 0;
};

// Seconds per run on a device's own clock (CUDA events; device_allocator.h's DeviceTimer): the
// workload times itself and leaves the figure in *seconds, which end() records. `how` says what
// the timer brackets (e.g. whether caches were flushed before each run).
class DeviceTime : public Metric {
 public:
  DeviceTime(const double* seconds, std::string how) : seconds_(seconds), how_(std::move(how)) {}
  std::string name() const override { return "device_time"; }
  std::string unit() const override { return "s"; }
  void end() override { add_sample(*seconds_); }
  MetricRecord result() const override;

 private:
  const double* seconds_;
  std::string how_;
};

// CPU seconds of the whole process (all threads) per run.
class CpuTime : public Metric {
 public:
  std::string name() const override { return "cpu_time"; }
  std::string unit() const override { return "s"; }
  void begin() override { start_ = process_cpu_now_ns(); }
  void end() override { add_sample(static_cast<double>(process_cpu_now_ns() - start_) * 1e-9); }
  MetricRecord result() const override;

 private:
  int64_t start_ = 0;
};

// CPU time / (wall time x threads): 1.0 means every thread was busy the whole run.
class Utilization : public Metric {
 public:
  explicit Utilization(int threads);
  std::string name() const override { return "cpu_utilization"; }
  std::string unit() const override { return "fraction"; }
  void begin() override;
  void end() override;
  MetricRecord result() const override;

 private:
  int threads_;
  int64_t wall0_ = 0, cpu0_ = 0;
};

// Peak resident set size during each run. The kernel's high-water mark is reset before each
// run where allowed; where not, the record says the peak is process-wide.
class PeakRss : public Metric {
 public:
  std::string name() const override { return "peak_rss"; }
  std::string unit() const override { return "bytes"; }
  void begin() override;
  void end() override;
  MetricRecord result() const override;

 private:
  bool resettable_ = true;
};

// High-water mark of bytes held by deep500 tensors during each run.
class TensorPeakMemory : public Metric {
 public:
  std::string name() const override { return "tensor_peak_memory"; }
  std::string unit() const override { return "bytes"; }
  void begin() override;
  void end() override;
};

// Joules per run summed over RAPL package domains (plus each domain in `info`).
// Unavailable (never zero) where RAPL is not readable.
class Energy : public Metric {
 public:
  Energy();
  std::string name() const override { return "energy"; }
  std::string unit() const override { return "J"; }
  void begin() override;
  void end() override;
  MetricRecord result() const override;

 private:
  std::string unavailable_reason_;
  std::optional<EnergyReading> start_;
  std::vector<std::vector<double>> per_domain_;
};

}  // namespace d5
