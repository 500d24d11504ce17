// The load generator and the system under test, each on its own thread (docs/serve-bench.md).
#include "deep500/net/inference_scenarios.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/core/threads.h"
#include "deep500/metrics/energy.h"

namespace d5 {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kOfflineMinSamples = 1024;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The energy counters around the measured part of a run (after the warm-up): start() when it
// begins (again for a repeated offline run), stop() when its last query completed.
struct EnergyWindow {
  bool rapl = false;
  std::optional<EnergyReading> begin, end;
  std::shared_ptr<const DeviceSensors> sensors;  // the device's, when the executor runs on one
  std::optional<double> device_begin, device_end;
  std::string device_reason;
  Clock::time_point device_t0, device_t1;
  std::optional<double> device_joules() {
    if (!sensors) return std::nullopt;
    const auto r = sensors->read(&device_reason);
    if (r && !r->energy_joules) device_reason = sensors->source() + " reports no energy counter for this device";
    return r ? r->energy_joules : std::nullopt;
  }
  void start() {
    if (rapl) begin = read_energy();
    device_begin = device_joules();
    device_t0 = Clock::now();
  }
  void stop() {
    if (rapl) end = read_energy();
    device_end = device_joules();
    device_t1 = Clock::now();
  }
};

// The device's energy over the measured window into `r`, or why there is none.
void device_energy(const EnergyWindow& e, ScenarioResult& r) {
  if (!e.sensors) {
    r.device_energy_reason = e.device_reason;
    return;
  }
  r.device_energy_source = e.sensors->source();
  const double window = seconds(e.device_t1 - e.device_t0);
  if (!e.device_begin || !e.device_end) {
    r.device_energy_reason = e.device_reason;
  } else if (window < kMinDeviceEnergyWindow) {
    r.device_energy_reason = fmt::format("the measured window ({:.3g} s) is shorter than {:g} s: the counter advances "
                                         "in steps of tens of milliseconds (--min-duration)",
                                         window, kMinDeviceEnergyWindow);
  } else if (*e.device_end < *e.device_begin) {
    r.device_energy_reason = "the energy counter went back (the driver was reloaded during the run)";
  } else if (r.samples == 0) {
    r.device_energy_reason = "no sample was measured to divide the energy by";
  } else {
    r.device_energy_available = true;
    r.device_joules_per_sample = (*e.device_end - *e.device_begin) / static_cast<double>(r.samples);
  }
}

// The system under test: a thread that takes queries from a queue, runs the executor once per
// query (or, batching, once per group of queued queries) and records when each completed. The load
// generator only issues and waits.
class SystemUnderTest {
 public:
  // max_batch > 1: dynamic batching, up to that many queries per call, waiting at most `timeout`
  // after the oldest queued query was issued.
  SystemUnderTest(GraphExecutor& ex, const TensorMap& feeds, size_t max_batch = 1,
                  Clock::duration timeout = Clock::duration::zero())
      : ex_(ex), feeds_(feeds), max_batch_(std::max<size_t>(max_batch, 1)), timeout_(timeout) {
    worker_ = std::thread([this] { serve(); });
  }
  ~SystemUnderTest() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void issue(int64_t id) {
    {
      std::lock_guard lock(mu_);
      pending_.push_back({id, Clock::now()});
    }
    cv_.notify_all();
  }
  // Blocks until `count` queries completed since construction; rethrows the executor's error.
  void wait_completed(size_t count) {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return completed_.size() >= count || error_; });
    if (error_) std::rethrow_exception(error_);
  }
  Clock::time_point completed_at(size_t i) {
    std::lock_guard lock(mu_);
    return completed_.at(i);
  }
  // Queries per executor call, from call `first` on.
  std::vector<int64_t> batches(size_t first) {
    std::lock_guard lock(mu_);
    return {batches_.begin() + static_cast<std::ptrdiff_t>(std::min(first, batches_.size())), batches_.end()};
  }
  size_t calls() {
    std::lock_guard lock(mu_);
    return batches_.size();
  }

 private:
  struct Query {
    int64_t id;
    Clock::time_point issued;
  };

  void serve() {
    apply_thread_settings_to_this_thread();
    for (;;) {
      size_t take = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        if (stop_ && pending_.empty()) return;
        if (max_batch_ > 1)
          cv_.wait_until(lock, pending_.front().issued + timeout_,
                         [&] { return stop_ || pending_.size() >= max_batch_; });
        take = std::min(pending_.size(), max_batch_);
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(take));
      }
      try {
        ex_.inference(feeds_);
      } catch (...) {
        std::lock_guard lock(mu_);
        error_ = std::current_exception();
        done_cv_.notify_all();
        return;
      }
      const auto now = Clock::now();
      {
        std::lock_guard lock(mu_);
        completed_.insert(completed_.end(), take, now);
        batches_.push_back(static_cast<int64_t>(take));
      }
      done_cv_.notify_all();
    }
  }

  GraphExecutor& ex_;
  const TensorMap& feeds_;
  const size_t max_batch_;
  const Clock::duration timeout_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Query> pending_;
  std::vector<Clock::time_point> completed_;
  std::vector<int64_t> batches_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

int64_t batch_of(GraphExecutor& ex) {
  const Network& net = ex.network();
  D5_CHECK_ARG(!net.inputs().empty(), "network '{}' has no input to issue queries to", net.name());
  net.infer();
  const Shape& s = net.desc(net.inputs().front()).shape;
  return s.rank() > 0 ? s[0] : 1;
}

void single_stream(GraphExecutor& ex, const TensorMap& feeds, const ScenarioOptions& o, ScenarioResult& r,
                   EnergyWindow& energy) {
  SystemUnderTest sut(ex, feeds);
  size_t issued = 0;
  for (int i = 0; i < o.warmup_queries; ++i) {
    sut.issue(static_cast<int64_t>(issued++));
    sut.wait_completed(issued);
  }
  energy.start();
  const auto start = Clock::now();
  auto last = start;
  while (r.queries < o.max_queries &&
         (r.queries < r.min_queries || seconds(last - start) < o.min_duration_s)) {
    const auto at = Clock::now();
    sut.issue(static_cast<int64_t>(issued++));
    sut.wait_completed(issued);
    last = sut.completed_at(issued - 1);
    r.latencies_s.push_back(seconds(last - at));
    ++r.queries;
  }
  energy.stop();
  r.duration_s = seconds(last - start);
}

void offline(GraphExecutor& ex, const TensorMap& feeds, const ScenarioOptions& o, ScenarioResult& r,
             EnergyWindow& energy) {
  SystemUnderTest sut(ex, feeds);
  size_t issued = 0;
  // Warm-up queries also size the run: enough batches for min_duration at the warm-up's pace.
  Clock::duration per_batch{};
  for (int i = 0; i < std::max(o.warmup_queries, 1); ++i) {
    const auto at = Clock::now();
    sut.issue(static_cast<int64_t>(issued++));
    sut.wait_completed(issued);
    per_batch = sut.completed_at(issued - 1) - at;
  }
  double per_batch_s = std::max(seconds(per_batch), 1e-6);
  const int64_t for_samples = (r.min_queries + r.batch - 1) / r.batch;
  const int64_t most = std::max<int64_t>(1, o.max_queries);
  // LoadGen sizes an offline run from the expected rate; the warm-up's may be off (a backend still
  // warming up), so a run that ends short of min_duration is repeated with the count its own pace
  // asks for (with a margin that grows, for a machine whose load changes meanwhile), up to five
  // times; the last run is the one reported.
  for (int attempt = 0; attempt < 5; ++attempt) {
    const double margin = 1.1 + 0.2 * attempt;
    const auto for_duration = static_cast<int64_t>(std::ceil(margin * o.min_duration_s / per_batch_s));
    const int64_t queries = std::clamp<int64_t>(std::max(for_samples, for_duration), 1, most);
    const size_t first = issued;
    energy.start();
    const auto start = Clock::now();
    std::vector<Clock::time_point> issued_at;
    for (int64_t q = 0; q < queries; ++q) {
      issued_at.push_back(Clock::now());
      sut.issue(static_cast<int64_t>(issued++));
    }
    sut.wait_completed(issued);
    energy.stop();
    r.latencies_s.clear();
    r.intervals_s.clear();
    for (int64_t q = 0; q < queries; ++q) {
      const auto done = sut.completed_at(first + static_cast<size_t>(q));
      r.latencies_s.push_back(seconds(done - issued_at[static_cast<size_t>(q)]));
      r.intervals_s.push_back(seconds(done - (q == 0 ? start : sut.completed_at(first + static_cast<size_t>(q) - 1))));
    }
    r.queries = queries;
    r.duration_s = seconds(sut.completed_at(issued - 1) - start);
    if (r.duration_s >= o.min_duration_s || queries == most) break;
    per_batch_s = std::max(r.duration_s / static_cast<double>(queries), 1e-6);
  }
}


// Poisson arrivals: exponential gaps of mean 1 / qps from a seeded generator, so a rerun issues at
// the same offsets. Each query is issued at its scheduled time (the load generator sleeps until
// then) and timed from it, so a busy system's queueing counts against it.
void server(GraphExecutor& ex, const TensorMap& feeds, const ScenarioOptions& o, ScenarioResult& r,
            EnergyWindow& energy) {
  D5_CHECK_ARG(o.target_qps > 0, "the server scenario needs a target rate (--target-qps) above 0, got {}", o.target_qps);
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.batch_timeout_s));
  SystemUnderTest sut(ex, feeds, o.dynamic_batching ? static_cast<size_t>(batch_of(ex)) : 1, timeout);
  size_t issued = 0;
  for (int i = 0; i < o.warmup_queries; ++i) {
    sut.issue(static_cast<int64_t>(issued++));
    sut.wait_completed(issued);
  }
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.target_qps);
  const size_t first = issued, first_call = sut.calls();
  energy.start();
  const auto start = Clock::now();
  std::vector<Clock::time_point> scheduled;
  std::vector<double> late;
  double offset = 0;
  while (static_cast<int64_t>(scheduled.size()) < o.max_queries &&
         (static_cast<int64_t>(scheduled.size()) < r.min_queries || offset < o.min_duration_s)) {
    offset += gap(rng);
    const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(offset));
    std::this_thread::sleep_until(at);
    late.push_back(seconds(Clock::now() - at));
    scheduled.push_back(at);
    sut.issue(static_cast<int64_t>(issued++));
  }
  sut.wait_completed(issued);
  energy.stop();
  for (size_t q = 0; q < scheduled.size(); ++q)
    r.latencies_s.push_back(seconds(sut.completed_at(first + q) - scheduled[q]));
  r.queries = static_cast<int64_t>(scheduled.size());
  r.duration_s = seconds(sut.completed_at(issued - 1) - start);
  if (o.dynamic_batching) r.batches = sut.batches(first_call);
  r.target_qps = o.target_qps;
  r.achieved_qps = static_cast<double>(r.queries) / std::max(seconds(scheduled.back() - start), 1e-9);
  std::sort(late.begin(), late.end());
  r.issue_lateness_max_s = late.back();
  r.issue_lateness_p99_s = late[std::min(late.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(late.size())))];
}

// A server run that missed its bound while the load generator itself woke late by a good part of
// it: the user should know the machine, not only the system under test, set the tail.
std::string machine_stall_note(const ScenarioResult& r, double bound_s) {
  if (r.issue_lateness_max_s < 0.25 * bound_s) return "";
  return fmt::format(" (the load generator, which only sleeps, woke up to {:.3g} s late: the machine stalled for a "
                     "sizeable part of the bound)",
                     r.issue_lateness_max_s);
}

}  // namespace

const char* to_string(InferenceScenario s) {
  switch (s) {
    case InferenceScenario::single_stream: return "single-stream";
    case InferenceScenario::multi_stream: return "multi-stream";
    case InferenceScenario::offline: return "offline";
    case InferenceScenario::server: return "server";
  }
  return "?";
}

InferenceScenario parse_inference_scenario(const std::string& name) {
  if (name == "single-stream") return InferenceScenario::single_stream;
  if (name == "multi-stream") return InferenceScenario::multi_stream;
  if (name == "offline") return InferenceScenario::offline;
  if (name == "server") return InferenceScenario::server;
  throw InvalidArgument(fmt::format("no inference scenario '{}' (scenarios: single-stream, multi-stream, offline, server)", name));
}

ScenarioResult run_inference_scenario(GraphExecutor& executor, const TensorMap& feeds, const ScenarioOptions& o) {
  D5_CHECK_ARG(o.min_duration_s >= 0, "the minimum duration must be >= 0 s, got {}", o.min_duration_s);
  D5_CHECK_ARG(o.min_queries >= 0 && o.max_queries >= 1, "query counts must be >= 0 (minimum) and >= 1 (maximum)");
  D5_CHECK_ARG(o.warmup_queries >= 0, "warm-up queries must be >= 0, got {}", o.warmup_queries);
  D5_CHECK_ARG(!o.dynamic_batching || o.scenario == InferenceScenario::server,
               "dynamic batching gathers queries that arrive independently: only the server scenario has them ({} "
               "issues {})",
               to_string(o.scenario),
               o.scenario == InferenceScenario::offline ? "every query at once, already in batches"
                                                        : "one query at a time");
  D5_CHECK_ARG(o.batch_timeout_s >= 0, "the batching timeout must be >= 0 s, got {}", o.batch_timeout_s);
  ScenarioResult r;
  r.scenario = o.scenario;
  r.batch = o.dynamic_batching ? 1 : batch_of(executor);
  const bool offline_run = o.scenario == InferenceScenario::offline;
  const bool server_run = o.scenario == InferenceScenario::server;
  const bool single = !offline_run;  // counted in queries, judged by a latency percentile
  const double percentile = server_run                                      ? o.server_percentile
                            : o.scenario == InferenceScenario::multi_stream ? o.multi_stream_percentile
                                                                            : o.percentile;
  r.min_queries = o.min_queries > 0 ? o.min_queries
                  : single      ? min_samples_for_percentile_bound(percentile, o.confidence)
                                : kOfflineMinSamples;
  std::string energy_reason;
  EnergyWindow energy;
  energy.rapl = !rapl_domains(&energy_reason).empty();
  if (o.energy_device.kind == DeviceKind::cpu)
    energy.device_reason = "the executor runs on the host (its energy is RAPL's)";
  else
    energy.sensors = allocator_for(o.energy_device).sensors(o.energy_device.index, &energy.device_reason);
  if (server_run) server(executor, feeds, o, r, energy);
  else if (single) single_stream(executor, feeds, o, r, energy);
  else offline(executor, feeds, o, r, energy);
  r.samples = r.queries * r.batch;
  r.throughput = r.duration_s > 0 ? static_cast<double>(r.samples) / r.duration_s : 0;
  if (energy.begin && energy.end && r.samples > 0) {
    const auto joules = energy_joules_between(*energy.begin, *energy.end);
    r.energy_available = true;
    r.joules_per_sample = std::accumulate(joules.begin(), joules.end(), 0.0) / static_cast<double>(r.samples);
  } else {
    r.energy_reason = energy.rapl ? "the energy counters could not be read" : energy_reason;
  }
  device_energy(energy, r);

  const double have = single ? static_cast<double>(r.queries) : static_cast<double>(r.samples);
  std::vector<std::string> short_of;
  if (r.duration_s < o.min_duration_s)
    short_of.push_back(fmt::format("ran {:.3g} s of the {:g} s asked for{}", r.duration_s, o.min_duration_s,
                                   r.queries >= o.max_queries ? fmt::format(" (stopped at --max-queries {})", o.max_queries)
                                                              : ""));
  if (have < static_cast<double>(r.min_queries))
    short_of.push_back(fmt::format("{} {} of the {} asked for", have, single ? "queries" : "samples", r.min_queries));
  if (single) {
    r.latency_bound = percentile_upper_bound(r.latencies_s, percentile, o.confidence);
    if (!r.latency_bound.available) short_of.push_back(r.latency_bound.reason);
  }
  if (server_run && r.latency_bound.available) {
    r.meets_latency_bound = r.latency_bound.value <= o.latency_bound_s;
    if (!r.meets_latency_bound)
      short_of.push_back(fmt::format("at {:g} queries/s the p{:g} latency may reach {:.4g} s ({:g}% upper bound), "
                                     "over the bound of {:g} s{}",
                                     o.target_qps, 100 * percentile, r.latency_bound.value, 100 * o.confidence,
                                     o.latency_bound_s, machine_stall_note(r, o.latency_bound_s)));
  }
  r.valid = short_of.empty();
  if (r.valid)
    r.reason = fmt::format("{} {} in {:.3g} s (at least {} and {:g} s asked for){}", have,
                           single ? "queries" : "samples", r.duration_s, r.min_queries, o.min_duration_s,
                           server_run ? fmt::format("; the p{:g} latency's {:g}% bound {:.4g} s is within {:g} s",
                                                    100 * percentile, 100 * o.confidence, r.latency_bound.value,
                                                    o.latency_bound_s)
                                      : "");
  else
    r.reason = fmt::format("{}", fmt::join(short_of, "; "));
  return r;
}

QpsSearch search_server_qps(GraphExecutor& executor, const TensorMap& feeds, const ScenarioOptions& options,
                            int steps) {
  D5_CHECK_ARG(steps >= 1, "the rate search needs at least one step, got {}", steps);
  QpsSearch s;
  // Capacity: single queries back to back, a short single-stream run.
  ScenarioOptions probe = options;
  probe.scenario = InferenceScenario::single_stream;
  probe.min_duration_s = std::min(options.min_duration_s, 0.5);
  probe.min_queries = 0;
  probe.dynamic_batching = false;
  const ScenarioResult p = run_inference_scenario(executor, feeds, probe);
  std::vector<double> sorted = p.latencies_s;
  std::sort(sorted.begin(), sorted.end());
  // Batching, one call serves up to a whole batch of one-sample queries.
  const double per_call = options.dynamic_batching ? static_cast<double>(p.batch) : 1.0;
  s.capacity_qps = per_call / std::max(sorted[sorted.size() / 2], 1e-9);
  double good = 0, bad = s.capacity_qps;  // the bound is met below `good`... and not at `bad` (assumed)
  for (int i = 0; i < steps; ++i) {
    ScenarioOptions o = options;
    o.scenario = InferenceScenario::server;
    o.target_qps = i == 0 ? 0.5 * s.capacity_qps : 0.5 * (good + bad);
    s.runs.push_back(run_inference_scenario(executor, feeds, o));
    const ScenarioResult& r = s.runs.back();
    if (r.valid) {
      good = o.target_qps;
      s.best_qps = good;
      s.best_run = static_cast<int>(s.runs.size()) - 1;
    } else {
      bad = o.target_qps;
    }
  }
  return s;
}

RepeatedQpsSearch repeat_server_qps_search(GraphExecutor& executor, const TensorMap& feeds,
                                           const ScenarioOptions& options, int steps, int repeats) {
  D5_CHECK_ARG(repeats >= 1, "the rate search needs at least one repeat, got {}", repeats);
  RepeatedQpsSearch out;
  for (int i = 0; i < repeats; ++i) {
    out.searches.push_back(search_server_qps(executor, feeds, options, steps));
    out.best_qps.push_back(out.searches.back().best_qps);
  }
  out.summary = summarize(out.best_qps);
  double nearest = 0;
  for (size_t i = 0; i < out.best_qps.size(); ++i) {
    const double d = std::abs(out.best_qps[i] - out.summary.median);
    if (out.median_search < 0 || d < nearest) out.median_search = static_cast<int>(i), nearest = d;
  }
  return out;
}

}  // namespace d5
