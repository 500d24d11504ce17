#pragma once
// The Metric interface, after Deep500's TestMetric: a metric says how many reruns it needs, is
// told when each run begins and ends, records raw samples, and summarizes them. Metrics never
// know which operator, network or optimizer they measure.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/statistics.h"

namespace d5 {

struct MetricRecord {
  std::string name;
  std::string unit;
  std::vector<double> samples;     // raw, in measurement order; always kept
  std::optional<Summary> summary;  // absent when there are no samples
  bool available = true;           // false: the host cannot measure it (reason says why)
  std::string unavailable_reason;
  nlohmann::json info = nlohmann::json::object();  // metric-specific facts (clock used, ...)
};

// A record of raw samples with their summary (none without samples).
MetricRecord metric_record(std::string name, std::string unit, std::vector<double> samples);

class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  virtual std::string unit() const = 0;
  // Runs this metric needs; 0 lets the runner decide (adaptive repetition).
  virtual int reruns() const { return 0; }
  virtual void begin() {}
  // Called after each run; records a sample (or nothing when unavailable).
  virtual void end() = 0;
  virtual MetricRecord result() const;
  virtual void reset() { samples_.clear(); }

  const std::vector<double>& samples() const { return samples_; }
  // For values measured outside begin/end (e.g. an accuracy computed by the caller).
  void add_sample(double v) { samples_.push_back(v); }

 protected:
  std::vector<double> samples_;
};

// A set driven together. The first metric is the primary one (the runner's stopping rule uses
// it) and is innermost: begun last and ended first, so the others' bookkeeping is not in it.
class MetricSet {
 public:
  MetricSet() = default;
  MetricSet& add(std::unique_ptr<Metric> m);
  void begin();
  void end();
  void reset();
  size_t size() const { return metrics_.size(); }
  Metric& operator[](size_t i) { return *metrics_[i]; }
  const Metric& operator[](size_t i) const { return *metrics_[i]; }
  Metric* find(const std::string& name);
  int reruns() const;  // max over members
  std::vector<MetricRecord> results() const;

 private:
  std::vector<std::unique_ptr<Metric>> metrics_;
};

}  // namespace d5
