#pragma once
// Level 1 metrics (docs/executor-metrics.md): where an executor's time goes (per node and per op
// type, both passes), FrameworkOverhead (executor time / the same operators run individually),
// and inference latency percentiles and throughput against batch size. Every function works on
// any GraphExecutor and returns records that go into d5::Results.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deep500/net/graph_executor.h"
#include "deep500/metrics/metric.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"

namespace d5 {

// An event that times every operator call and every executor call (wall clock). Attach it, run,
// then ask breakdown(). An operator whose tensors live on a device with a clock of its own (a GPU)
// is timed by that clock: its work is queued, so the host's time between before_operator and
// after_operator would be the launch alone. The device's timers are read once the executor call
// ends, so timing adds no synchronisation inside a call; at its end the devices it used are
// synchronised, so that the call's time covers the work it queued.
class NodeTimer : public ExecutorEvent {
 public:
  NodeTimer();
  ~NodeTimer() override;
  void before_executor(const TensorMap&) override;
  bool before_operator(const Node& node, Pass pass, std::span<const Tensor>) override;
  bool after_operator(const Node& node, Pass pass, std::span<const Tensor>) override;
  void after_executor(const TensorMap&) override;

  struct NodeSamples {
    std::string op_type;
    std::vector<double> seconds;  // one per call
    std::string clock = "host";   // "host" (wall clock), or the device whose clock timed it ("cuda:0")
  };
  // (node, pass) -> samples; first-seen order is kept in order().
  const std::map<std::pair<std::string, Pass>, NodeSamples>& samples() const { return samples_; }
  const std::vector<std::pair<std::string, Pass>>& order() const { return order_; }
  const std::vector<double>& executor_seconds() const { return calls_; }
  void reset();

 private:
  std::map<std::pair<std::string, Pass>, NodeSamples> samples_;
  std::vector<std::pair<std::string, Pass>> order_;
  std::vector<double> calls_;
  int64_t call_start_ = 0, op_start_ = 0;
  struct DeviceClocks;  // the device timers of one call, reused by the next
  std::unique_ptr<DeviceClocks> clocks_;
};

struct BreakdownRow {
  std::string name;  // node name, or op type in the per-type table
  std::string op_type;
  std::string implementation;  // per node; "" per type
  std::string clock = "host";  // per node: what timed it (NodeTimer::NodeSamples::clock)
  Pass pass = Pass::forward;
  int64_t nodes = 1;   // nodes of this type (per-type rows)
  // Mean per executor call: total time over the calls, so that rows and the time outside
  // operators add up to the calls' total even when noise hits a different node in each call
  // (medians per node would not).
  double seconds = 0;
  double median_seconds = 0;  // per call; per-type rows: sum of the nodes' medians
  double percent = 0;         // of the executor calls' total time
};

struct Breakdown {
  int64_t calls = 0;
  double executor_seconds = 0;  // mean wall time of one executor call
  double executor_median_seconds = 0;
  double operator_seconds = 0;  // sum of all rows' seconds
  // Executor time outside operators (events, allocation, bookkeeping), as % of the call time.
  double outside_percent = 0;
  std::vector<BreakdownRow> nodes;     // in execution order (forward, then backward)
  std::vector<BreakdownRow> op_types;  // sorted by time, largest first
  int64_t device_timed_nodes = 0;      // rows timed by a device's clock rather than the host's
};
// implementations: GraphExecutor::implementations(), for the per-node column. InvalidArgument
// when the timer recorded nothing.
Breakdown breakdown(const NodeTimer& timer, const std::map<std::string, std::string>& implementations = {});
nlohmann::json to_json(const Breakdown& b);
// The inverse of to_json (for tables from result files); FormatError naming a missing key.
Breakdown breakdown_from_json(const nlohmann::json& j);
// The console table: top `max_rows` nodes by time, then the per-type table.
std::string format_breakdown(const Breakdown& b, size_t max_rows = 20);

// FrameworkOverhead = executor time / sum of the times of the same nodes' operators run
// individually. Each round runs the executor once and every operator the executor ran once
// (fresh operators: an OperatorExecutor's create_operator_like, else created from the node's spec
// on `op_backends`; fed the values the executor fed it: inputs for forward, upstream gradients
// for backward), back to back, alternating which side goes first, and yields one ratio; the
// runner repeats rounds until the median ratio's CI is tight. loss "" measures inference, else a
// training step (forward and backward on both sides).
//
// When the operators alone are the executor's own (an OperatorExecutor on its own backends,
// info["same_operators"]), a ratio whose whole CI lies below 1 is not a finding but a sign that
// the two sides ran under different conditions: state MISTRUSTED, with the reason (also in
// ratio.info["mistrusted"]). A framework's own executor (torch) is compared with deep500's
// operators of that backend, which it may legitimately beat: there a ratio below 1 is a finding.
struct FrameworkOverhead {
  MetricRecord ratio;           // "framework_overhead": one sample per round; median and 95% CI
  MetricRecord executor_time;   // "executor_time": seconds per round
  MetricRecord operators_time;  // "operators_time": the individual operators' sum per round
  RunOutcome outcome;
  std::vector<std::string> op_backends;
  int64_t operators = 0;  // operator calls per round
  CaseState state = CaseState::Passed;  // Passed or Mistrusted
  std::string mistrust_reason;          // set exactly when Mistrusted
};
// The reason a FrameworkOverhead ratio cannot be trusted (its median's 95% CI lies below 1), or
// "" when it can (or has no CI to judge by).
std::string overhead_mistrust_reason(const MetricRecord& ratio);
// op_backends empty: an OperatorExecutor's own backend list (and its workspace limit); for other
// executors {executor.backend()} followed by "reference" when that is another backend.
FrameworkOverhead framework_overhead(GraphExecutor& executor, const TensorMap& feeds,
                                     const std::string& loss = "", std::vector<std::string> op_backends = {},
                                     const RunSettings& settings = {});

// Latency of one call (inference, or a training step when loss is not empty), with p50/p90/p99
// in its summary, and the throughput batch / latency (samples/s), run by run.
struct LatencyThroughput {
  int64_t batch = 0;
  MetricRecord latency;     // "latency", s
  MetricRecord throughput;  // "throughput", samples/s
  RunOutcome outcome;
};
LatencyThroughput measure_latency(GraphExecutor& executor, const TensorMap& feeds, int64_t batch,
                                  const std::string& loss = "", const RunSettings& settings = {});

// Feeds for every graph input: floating-point values uniform in [-1, 1]; integer inputs that a
// loss reads as class labels (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss input 1) or a
// Gather as indices are uniform over the valid range, CTCLoss's targets uniform over the classes
// but the blank (every sequence as long as the tensor); other integer inputs are 0.
TensorMap synthetic_feeds(const Network& network, uint64_t seed);

// Latency and throughput for each batch size: make_network(batch) builds the network at that
// batch (the first input dimension), run on `backend` with synthetic_feeds. One case per batch.
std::vector<CaseResult> batch_scaling(const std::function<Network(int64_t)>& make_network,
                                      const std::string& backend, const std::vector<int64_t>& batches,
                                      const std::string& loss = "", const RunSettings& settings = {},
                                      uint64_t seed = 0x5eed);

}  // namespace d5
