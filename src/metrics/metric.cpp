#include "deep500/metrics/metric.h"

#include <algorithm>

#include "deep500/core/error.h"

namespace d5 {

MetricRecord metric_record(std::string name, std::string unit, std::vector<double> samples) {
  MetricRecord r;
  r.name = std::move(name);
  r.unit = std::move(unit);
  r.samples = std::move(samples);
  if (!r.samples.empty()) r.summary = summarize(r.samples);
  return r;
}

MetricRecord Metric::result() const { return metric_record(name(), unit(), samples_); }

MetricSet& MetricSet::add(std::unique_ptr<Metric> m) {
  D5_CHECK_ARG(m != nullptr, "MetricSet::add: null metric");
  D5_CHECK_ARG(find(m->name()) == nullptr, "metric '{}' is already in the set", m->name());
  metrics_.push_back(std::move(m));
  return *this;
}

void MetricSet::begin() {
  for (auto it = metrics_.rbegin(); it != metrics_.rend(); ++it) (*it)->begin();
}

void MetricSet::end() {
  for (auto& m : metrics_) m->end();
}

void MetricSet::reset() {
  for (auto& m : metrics_) m->reset();
}

Metric* MetricSet::find(const std::string& name) {
  for (auto& m : metrics_)
    if (m->name() == name) return m.get();
  return nullptr;
}

int MetricSet::reruns() const {
  int r = 0;
  for (const auto& m : metrics_) r = std::max(r, m->reruns());
  return r;
}

std::vector<MetricRecord> MetricSet::results() const {
  std::vector<MetricRecord> out;
  for (const auto& m : metrics_) out.push_back(m->result());
  return out;
}

}  // namespace d5
