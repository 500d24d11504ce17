#pragma once
// Inference scenarios after MLPerf's LoadGen (docs/serve-bench.md): a load generator thread
// issues queries to the system under test (a graph executor running on a thread of its own) and
// times each from issue to completion.
//
// - single-stream: one query of one sample at a time, the next issued when the last completes;
//   the score is an upper confidence bound on the latency percentile (p90), LoadGen's early
//   stopping estimate (percentile_bound.h). VALID when the run lasted min_duration, issued
//   min_queries and has enough queries for the bound.
// - multi-stream: as single-stream, with queries of several samples (the network's batch: one per
//   stream, as from several cameras at once) and the p99 as the percentile (multi_stream_percentile):
//   459 queries at least.
// - offline: every query issued at once; the system runs them in batches of the network's batch
//   size; the score is samples per second from the first issue to the last completion. VALID when
//   the run lasted min_duration and processed min_queries samples. A run that ends short of
//   min_duration (the warm-up's pace misjudged the count) is repeated with the count its own pace
//   asks for, up to five times.
// - server: queries of one sample arrive as a Poisson process at target_qps (seeded), each issued
//   at its arrival time whether or not the system is busy, and timed from that scheduled time; the
//   run meets its latency bound when the upper confidence bound on the p99 latency (as for
//   single-stream) is within latency_bound_s. VALID when it lasted min_duration, issued
//   min_queries (459: what a p99 bound at 99% needs) and met the bound. search_server_qps finds
//   the highest rate that does.
//   With dynamic batching (server only), each query is one sample and the system under test
//   gathers queued queries into one executor call of up to the network's batch: it runs when that
//   many are queued, or when the oldest queued query has waited batch_timeout_s. A call with fewer
//   queries still runs the network's whole batch (the rest is padding, as a serving system with
//   fixed shapes does): latency and throughput count real queries only.
//
// Energy per sample comes from RAPL where the host exposes it, else its reason is kept; for an
// executor on a device (energy_device), also from the device's driver counters (NVML on NVIDIA
// GPUs, core/device_sensors.h) over windows of at least kMinDeviceEnergyWindow seconds.
#include <cstdint>
#include <string>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/metrics/percentile_bound.h"
#include "deep500/metrics/statistics.h"
#include "deep500/net/graph_executor.h"

namespace d5 {

// A GPU's energy counter advances in steps of its driver's power sampling (20-100 ms on NVIDIA
// GPUs): over a second or more, one step at each end is a few percent at most.
inline constexpr double kMinDeviceEnergyWindow = 1.0;

enum class InferenceScenario { single_stream, multi_stream, offline, server };
const char* to_string(InferenceScenario s);
InferenceScenario parse_inference_scenario(const std::string& name);  // InvalidArgument naming the choices

struct ScenarioOptions {
  InferenceScenario scenario = InferenceScenario::single_stream;
  double min_duration_s = 1.0;  // LoadGen's is 600 s; a smaller default keeps d5's own runs short
  // Single-stream: queries; offline: samples. 0: single-stream needs what its bound needs,
  // offline 1024 samples.
  int64_t min_queries = 0;
  int64_t max_queries = 1'000'000;  // a run stops here even before min_duration (then INVALID)
  double percentile = 0.9;          // single-stream's
  double multi_stream_percentile = 0.99;
  double confidence = 0.99;         // of the percentile's bound
  int warmup_queries = 3;           // untimed, before the measured run
  // Server: the arrival rate, the latency every query must meet at server_percentile, the seed of
  // the arrivals.
  double target_qps = 0;
  double latency_bound_s = 0.1;
  double server_percentile = 0.99;
  uint64_t seed = 0x5eed;
  bool dynamic_batching = false;  // server: queries of one sample batched up to the network's batch
  double batch_timeout_s = 1e-3;  // how long the oldest queued query may wait for others
  Device energy_device = Device::cpu();  // where the executor runs: a device's sensors give its energy
};

struct ScenarioResult {
  InferenceScenario scenario = InferenceScenario::single_stream;
  int64_t batch = 1;                 // samples per query
  int64_t queries = 0, samples = 0;  // measured
  std::vector<double> latencies_s;   // per query, issue to completion, in issue order
  std::vector<double> intervals_s;   // offline: between consecutive completions (the first from the issue)
  double duration_s = 0;             // first issue to last completion
  double throughput = 0;             // samples per second over duration_s
  PercentileBound latency_bound;     // single-stream, server: the early-stopping estimate of the percentile
  double target_qps = 0;             // server: the arrival rate asked for
  double achieved_qps = 0;           // server: queries over the time they were issued in
  bool meets_latency_bound = false;  // server
  // Server: how late the load generator issued each query after its scheduled arrival (it does
  // nothing but sleep until then, so lateness is the machine's: a descheduled thread or VM). Every
  // query's latency counts from the schedule, so a bound below the largest lateness is a bound on
  // the machine's stalls rather than on the system under test.
  double issue_lateness_p99_s = 0, issue_lateness_max_s = 0;
  std::vector<int64_t> batches;      // dynamic batching: queries per executor call, in order (measured part)
  int64_t min_queries = 0;           // what validity asked for (queries, or samples offline)
  bool valid = false;
  std::string reason;                // why VALID or INVALID, always set
  bool energy_available = false;
  double joules_per_sample = 0;
  std::string energy_reason;         // why there is no energy figure
  bool device_energy_available = false;
  double device_joules_per_sample = 0;
  std::string device_energy_source;  // "NVML 12.580.82" where available
  std::string device_energy_reason;  // why there is no device energy figure
};

// Runs the scenario on `executor` with the same `feeds` for every query (synthetic inputs; the
// outputs are not checked here: `d5 net` validates executors). The query's batch is the first
// dimension of the network's first input. InvalidArgument for inconsistent options.
ScenarioResult run_inference_scenario(GraphExecutor& executor, const TensorMap& feeds, const ScenarioOptions& options);

// The highest arrival rate whose server run meets the latency bound, by bisection: between 0 and
// the rate the system sustains one query at a time (measured first), `steps` server runs, each
// halving the interval between the highest rate that met the bound and the lowest that did not.
struct QpsSearch {
  double capacity_qps = 0;           // from single queries back to back (batching: a full batch per call)
  std::vector<ScenarioResult> runs;  // in the order tried
  double best_qps = 0;               // 0: no rate tried met the bound
  int best_run = -1;                 // index into runs
};
QpsSearch search_server_qps(GraphExecutor& executor, const TensorMap& feeds, const ScenarioOptions& options, int steps);

// The search repeated: on a shared machine one search's verdicts move with the machine's stalls (a
// single stall fails a run near the edge and sends the rest of the bisection lower), so the rate
// is the median of `repeats` independent searches, with its distribution-free 95% CI (from 6
// searches on; summarize()). A search that met the bound at no rate counts as 0.
struct RepeatedQpsSearch {
  std::vector<QpsSearch> searches;
  std::vector<double> best_qps;  // per search, in order
  Summary summary;               // of best_qps
  int median_search = -1;        // the search whose best rate is nearest the median (its run is reported)
};
RepeatedQpsSearch repeat_server_qps_search(GraphExecutor& executor, const TensorMap& feeds,
                                           const ScenarioOptions& options, int steps, int repeats);

}  // namespace d5
