#include "deep500/metrics/metric.h"

#include <algorithm>

#include "deep500/core/error.h"

namespace d5 {

MetricRecord Metric::result() const {
  MetricRecord r;
  r.name = name();
  r.unit = unit();
  r.samples = samples_;
  if (!samples_.empty()) r.summary = summarize(samples_);
  return r;
}

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
