// The load generator and the system under test, each on its own thread (docs/serve-bench.md).
#include "deep500/net/inference_scenarios.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
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
  void start() {
    if (rapl) begin = read_energy();
  }
  void stop() {
    if (rapl) end = read_energy();
  }
};

// The system under test: a thread that takes queries from a queue, runs the executor once per
// query and records when each completed. The load generator only issues and waits.
class SystemUnderTest {
 public:
  SystemUnderTest(GraphExecutor& ex, const TensorMap& feeds) : ex_(ex), feeds_(feeds) {
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
      pending_.push_back(id);
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

 private:
  void serve() {
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        if (stop_ && pending_.empty()) return;
        pending_.pop_front();
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
        completed_.push_back(now);
      }
      done_cv_.notify_all();
    }
  }

  GraphExecutor& ex_;
  const TensorMap& feeds_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<int64_t> pending_;
  std::vector<Clock::time_point> completed_;
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
  SystemUnderTest sut(ex, feeds);
  size_t issued = 0;
  for (int i = 0; i < o.warmup_queries; ++i) {
    sut.issue(static_cast<int64_t>(issued++));
    sut.wait_completed(issued);
  }
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.target_qps);
  const size_t first = issued;
  energy.start();
  const auto start = Clock::now();
  std::vector<Clock::time_point> scheduled;
  double offset = 0;
  while (static_cast<int64_t>(scheduled.size()) < o.max_queries &&
         (static_cast<int64_t>(scheduled.size()) < r.min_queries || offset < o.min_duration_s)) {
    offset += gap(rng);
    const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(offset));
    std::this_thread::sleep_until(at);
    scheduled.push_back(at);
    sut.issue(static_cast<int64_t>(issued++));
  }
  sut.wait_completed(issued);
  energy.stop();
  for (size_t q = 0; q < scheduled.size(); ++q)
    r.latencies_s.push_back(seconds(sut.completed_at(first + q) - scheduled[q]));
  r.queries = static_cast<int64_t>(scheduled.size());
  r.duration_s = seconds(sut.completed_at(issued - 1) - start);
  r.target_qps = o.target_qps;
  r.achieved_qps = static_cast<double>(r.queries) / std::max(seconds(scheduled.back() - start), 1e-9);
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
  ScenarioResult r;
  r.scenario = o.scenario;
  r.batch = batch_of(executor);
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
                                     "over the bound of {:g} s",
                                     o.target_qps, 100 * percentile, r.latency_bound.value, 100 * o.confidence,
                                     o.latency_bound_s));
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
  const ScenarioResult p = run_inference_scenario(executor, feeds, probe);
  std::vector<double> sorted = p.latencies_s;
  std::sort(sorted.begin(), sorted.end());
  s.capacity_qps = 1 / std::max(sorted[sorted.size() / 2], 1e-9);
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

}  // namespace d5
