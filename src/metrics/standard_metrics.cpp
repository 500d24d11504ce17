#include "deep500/metrics/standard_metrics.h"

#include <numeric>

#include "deep500/core/error.h"
#include "deep500/metrics/memory.h"
#include "deep500/core/tensor.h"

namespace d5 {

namespace {
nlohmann::json clock_json(ClockKind k) {
  const auto& c = clock_characteristics(k);
  return {{"clock", to_string(k)},
          {"reported_resolution_ns", c.reported_resolution_ns},
          {"observed_resolution_ns", c.observed_resolution_ns},
          {"call_overhead_ns", c.call_overhead_ns}};
}
}  // namespace

MetricRecord WallTime::result() const {
  MetricRecord r = Metric::result();
  r.info = clock_json(ClockKind::Wall);
  return r;
}

MetricRecord DeviceTime::result() const {
  MetricRecord r = Metric::result();
  r.info = {{"clock", "device events"}, {"brackets", how_}};
  return r;
}

MetricRecord CpuTime::result() const {
  MetricRecord r = Metric::result();
  r.info = clock_json(ClockKind::ProcessCpu);
  return r;
}

Utilization::Utilization(int threads) : threads_(threads) {
  D5_CHECK_ARG(threads > 0, "Utilization needs a positive thread count, got {}", threads);
}

void Utilization::begin() {
  wall0_ = wall_now_ns();
  cpu0_ = process_cpu_now_ns();
}

void Utilization::end() {
  const double cpu = static_cast<double>(process_cpu_now_ns() - cpu0_);
  const double wall = static_cast<double>(wall_now_ns() - wall0_);
  if (wall > 0) add_sample(cpu / (wall * threads_));
}

MetricRecord Utilization::result() const {
  MetricRecord r = Metric::result();
  r.info = {{"threads", threads_}};
  return r;
}

void PeakRss::begin() { resettable_ = reset_peak_rss() && resettable_; }

void PeakRss::end() {
  const int64_t peak = peak_rss_bytes();
  if (peak >= 0) add_sample(static_cast<double>(peak));
}

MetricRecord PeakRss::result() const {
  MetricRecord r = Metric::result();
  r.info = {{"scope", resettable_ ? "per_run" : "process_lifetime"}};
  if (samples_.empty()) {
    r.available = false;
    r.unavailable_reason = "the OS does not report peak RSS";
  }
  return r;
}

void TensorPeakMemory::begin() { reset_tensor_peak_memory(); }
void TensorPeakMemory::end() { add_sample(static_cast<double>(tensor_memory_stats().peak_bytes)); }

Energy::Energy() {
  const auto& domains = rapl_domains(&unavailable_reason_);
  per_domain_.resize(domains.size());
}

void Energy::begin() {
  if (unavailable_reason_.empty()) start_ = read_energy();
}

void Energy::end() {
  if (!start_) return;
  const auto stop = read_energy();
  if (!stop) return;
  const auto joules = energy_joules_between(*start_, *stop);
  double package_total = 0;
  const auto& domains = rapl_domains();
  for (size_t i = 0; i < joules.size(); ++i) {
    per_domain_[i].push_back(joules[i]);
    // Subdomains (core, uncore, dram inside a package) are already in the package counter.
    if (domains[i].name.rfind("package", 0) == 0) package_total += joules[i];
  }
  add_sample(package_total);
}

MetricRecord Energy::result() const {
  MetricRecord r = Metric::result();
  if (!unavailable_reason_.empty() || samples_.empty()) {
    r.available = false;
    r.unavailable_reason = unavailable_reason_.empty() ? "no RAPL reading succeeded" : unavailable_reason_;
    return r;
  }
  const auto& domains = rapl_domains();
  nlohmann::json d = nlohmann::json::object();
  for (size_t i = 0; i < domains.size(); ++i) d[domains[i].name] = per_domain_[i];
  r.info = {{"source", "RAPL /sys/class/powercap"}, {"domains_joules", d}};
  return r;
}

}  // namespace d5
