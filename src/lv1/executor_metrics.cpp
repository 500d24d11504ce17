#include "deep500/net/executor_metrics.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "deep500/metrics/reporter.h"
#include "deep500/core/rng.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/statistics.h"
#include "deep500/metrics/timer.h"

namespace d5 {

namespace {

const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : "backward"; }

double median_of(const std::vector<double>& v) { return v.empty() ? 0 : percentile(v, 50); }
double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double mean_of(const std::vector<double>& v) { return v.empty() ? 0 : sum_of(v) / static_cast<double>(v.size()); }

MetricRecord record(const std::string& name, const std::string& unit, std::vector<double> samples,
                    nlohmann::json info = nlohmann::json::object()) {
  MetricRecord r;
  r.name = name;
  r.unit = unit;
  r.samples = std::move(samples);
  if (!r.samples.empty()) r.summary = summarize(r.samples);
  r.info = std::move(info);
  return r;
}

}  // namespace

// ---------------------------------------------------------------- breakdown

// Timers per device, handed out in call order and read back in after_executor.
struct NodeTimer::DeviceClocks {
  struct Pool {
    std::vector<std::unique_ptr<DeviceTimer>> timers;
    size_t used = 0;
    bool has_clock = true;
  };
  struct Pending {
    std::pair<std::string, Pass> key;
    DeviceTimer* timer;
  };
  std::vector<std::pair<Device, Pool>> pools;  // a handful of devices at most
  std::vector<Pending> pending;
  DeviceTimer* current = nullptr;  // the running operator's, if a device times it
  Device current_device;

  Pool& pool(Device d) {
    for (auto& [device, p] : pools)
      if (device == d) return p;
    pools.emplace_back(d, Pool{});
    return pools.back().second;
  }
  // A started timer on the device of the operator's tensors, or null when they are all on the
  // host or their device has no clock.
  DeviceTimer* start(std::span<const Tensor> tensors) {
    for (const auto& t : tensors) {
      if (!t.defined() || t.device().kind == DeviceKind::cpu) continue;
      Pool& p = pool(t.device());
      if (!p.has_clock) return nullptr;
      if (p.used == p.timers.size()) {
        auto timer = allocator_for(t.device()).make_timer(t.device().index);
        if (!timer) {
          p.has_clock = false;
          return nullptr;
        }
        p.timers.push_back(std::move(timer));
      }
      DeviceTimer* timer = p.timers[p.used++].get();
      timer->start();
      current_device = t.device();
      return timer;
    }
    return nullptr;
  }
};

NodeTimer::NodeTimer() : clocks_(std::make_unique<DeviceClocks>()) {}
NodeTimer::~NodeTimer() = default;

void NodeTimer::before_executor(const TensorMap&) {
  for (auto& [device, p] : clocks_->pools) p.used = 0;
  clocks_->pending.clear();
  call_start_ = wall_now_ns();
}

bool NodeTimer::before_operator(const Node&, Pass, std::span<const Tensor> in) {
  clocks_->current = clocks_->start(in);
  op_start_ = wall_now_ns();
  return true;
}

bool NodeTimer::after_operator(const Node& node, Pass pass, std::span<const Tensor>) {
  const double s = static_cast<double>(wall_now_ns() - op_start_) * 1e-9;
  auto key = std::make_pair(node.name, pass);
  auto it = samples_.find(key);
  if (it == samples_.end()) {
    it = samples_.emplace(key, NodeSamples{node.op_type, {}, "host"}).first;
    order_.push_back(key);
  }
  if (DeviceTimer* timer = clocks_->current) {
    timer->stop();
    clocks_->pending.push_back({key, timer});
    clocks_->current = nullptr;
    it->second.clock = clocks_->current_device.to_string();
    return true;
  }
  it->second.seconds.push_back(s);
  return true;
}

void NodeTimer::after_executor(const TensorMap&) {
  // A call may return while work it queued still runs (a training step's backward pass, after the
  // outputs went to the host): the call's time ends when the devices it used are done with it, so
  // that the rows, each timed by its device, add up within it.
  for (const auto& [device, p] : clocks_->pools)
    if (p.used > 0) allocator_for(device).synchronize(device.index);
  calls_.push_back(static_cast<double>(wall_now_ns() - call_start_) * 1e-9);
  for (const auto& p : clocks_->pending) samples_.at(p.key).seconds.push_back(p.timer->seconds());
  clocks_->pending.clear();
}

void NodeTimer::reset() {
  samples_.clear();
  order_.clear();
  calls_.clear();
  clocks_->pending.clear();
}

Breakdown breakdown(const NodeTimer& timer, const std::map<std::string, std::string>& implementations) {
  D5_CHECK_ARG(!timer.executor_seconds().empty() && !timer.samples().empty(),
               "breakdown: the NodeTimer recorded no executor call; attach it with add_event and run first");
  Breakdown b;
  b.calls = static_cast<int64_t>(timer.executor_seconds().size());
  b.executor_seconds = mean_of(timer.executor_seconds());
  b.executor_median_seconds = median_of(timer.executor_seconds());
  const double total = b.executor_seconds > 0 ? b.executor_seconds : 1;
  std::map<std::pair<std::string, Pass>, BreakdownRow> by_type;
  // Forward rows first, then backward, each in execution order.
  for (Pass pass : {Pass::forward, Pass::backward}) {
    for (const auto& key : timer.order()) {
      if (key.second != pass) continue;
      const auto& s = timer.samples().at(key);
      BreakdownRow row;
      row.name = key.first;
      row.op_type = s.op_type;
      row.clock = s.clock;
      if (s.clock != "host") ++b.device_timed_nodes;
      auto impl = implementations.find(key.first);
      if (impl != implementations.end()) row.implementation = impl->second;
      row.pass = pass;
      // A node that ran in fewer calls (an early stop) still counts per executor call.
      row.seconds = sum_of(s.seconds) / static_cast<double>(b.calls);
      row.median_seconds = median_of(s.seconds);
      row.percent = 100 * row.seconds / total;
      b.operator_seconds += row.seconds;
      BreakdownRow& t = by_type[{s.op_type, pass}];
      if (t.name.empty()) {
        t.name = t.op_type = s.op_type;
        t.pass = pass;
        t.nodes = 0;
      }
      ++t.nodes;
      t.seconds += row.seconds;
      t.median_seconds += row.median_seconds;
      t.percent += row.percent;
      b.nodes.push_back(std::move(row));
    }
  }
  for (auto& [k, row] : by_type) b.op_types.push_back(row);
  std::sort(b.op_types.begin(), b.op_types.end(),
            [](const BreakdownRow& x, const BreakdownRow& y) { return x.seconds > y.seconds; });
  b.outside_percent = 100 * (b.executor_seconds - b.operator_seconds) / total;
  return b;
}

nlohmann::json to_json(const Breakdown& b) {
  auto rows = [](const std::vector<BreakdownRow>& v, bool per_node) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : v) {
      nlohmann::json j = {{"op_type", r.op_type},
                          {"pass", pass_name(r.pass)},
                          {"seconds", r.seconds},
                          {"median_seconds", r.median_seconds},
                          {"percent", r.percent}};
      if (per_node) {
        j["node"] = r.name;
        j["implementation"] = r.implementation;
        j["clock"] = r.clock;
      } else {
        j["nodes"] = r.nodes;
      }
      a.push_back(std::move(j));
    }
    return a;
  };
  return {{"calls", b.calls},
          {"executor_seconds", b.executor_seconds},
          {"executor_median_seconds", b.executor_median_seconds},
          {"operator_seconds", b.operator_seconds},
          {"outside_operators_percent", b.outside_percent},
          {"device_timed_nodes", b.device_timed_nodes},
          {"nodes", rows(b.nodes, true)},
          {"op_types", rows(b.op_types, false)}};
}

Breakdown breakdown_from_json(const nlohmann::json& j) {
  try {
    Breakdown b;
    b.calls = j.at("calls");
    b.executor_seconds = j.at("executor_seconds");
    b.executor_median_seconds = j.at("executor_median_seconds");
    b.operator_seconds = j.at("operator_seconds");
    b.outside_percent = j.at("outside_operators_percent");
    b.device_timed_nodes = j.value("device_timed_nodes", int64_t{0});
    auto rows = [](const nlohmann::json& a, bool per_node) {
      std::vector<BreakdownRow> v;
      for (const auto& r : a) {
        BreakdownRow row;
        row.op_type = r.at("op_type");
        row.pass = r.at("pass") == "forward" ? Pass::forward : Pass::backward;
        row.seconds = r.at("seconds");
        row.median_seconds = r.at("median_seconds");
        row.percent = r.at("percent");
        if (per_node) {
          row.name = r.at("node");
          row.implementation = r.at("implementation");
          row.clock = r.value("clock", "host");  // results written before device clocks
        } else {
          row.name = row.op_type;
          row.nodes = r.at("nodes");
        }
        v.push_back(std::move(row));
      }
      return v;
    };
    b.nodes = rows(j.at("nodes"), true);
    b.op_types = rows(j.at("op_types"), false);
    return b;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(fmt::format("breakdown: {}", e.what()));
  }
}

std::string format_breakdown(const Breakdown& b, size_t max_rows) {
  std::string s = fmt::format("time per call {} (mean of {} calls; median {}); {:.1f}% outside operators\n",
                              format_seconds(b.executor_seconds), b.calls,
                              format_seconds(b.executor_median_seconds), b.outside_percent);
  const bool clocks = b.device_timed_nodes > 0;
  if (clocks)
    s += fmt::format("  {} of {} rows timed by their device's clock (column 'clock'), the others by the host's\n",
                     b.device_timed_nodes, b.nodes.size());
  std::vector<BreakdownRow> top = b.nodes;
  std::stable_sort(top.begin(), top.end(),
                   [](const BreakdownRow& x, const BreakdownRow& y) { return x.seconds > y.seconds; });
  if (top.size() > max_rows) top.resize(max_rows);
  s += fmt::format("  {:<28} {:<22} {:<8} {}{:>10} {:>7}  {}\n", "node", "op", "pass",
                   clocks ? fmt::format("{:<8} ", "clock") : "", "time", "%", "implementation");
  for (const auto& r : top)
    s += fmt::format("  {:<28} {:<22} {:<8} {}{:>10} {:>6.1f}%  {}\n", r.name, r.op_type, pass_name(r.pass),
                     clocks ? fmt::format("{:<8} ", r.clock) : "", format_seconds(r.seconds), r.percent,
                     r.implementation);
  if (b.nodes.size() > top.size()) s += fmt::format("  ... {} more nodes\n", b.nodes.size() - top.size());
  s += fmt::format("  {:<22} {:<8} {:>6} {:>10} {:>7}\n", "op type", "pass", "nodes", "time", "%");
  for (const auto& r : b.op_types)
    s += fmt::format("  {:<22} {:<8} {:>6} {:>10} {:>6.1f}%\n", r.op_type, pass_name(r.pass), r.nodes,
                     format_seconds(r.seconds), r.percent);
  return s;
}

// ---------------------------------------------------------------- FrameworkOverhead

namespace {

// What the executor handed each operator: forward inputs, and for backward the upstream
// gradients, copied so the individual runs see the same values.
class CallRecorder : public ExecutorEvent {
 public:
  struct Call {
    Node node;
    std::vector<Tensor> inputs, grad_outputs;
    std::vector<bool> grads_given;  // per input: the executor's backward computed its gradient
    bool backward = false;
  };
  std::vector<Call> calls;  // in forward order
  bool before_operator(const Node& node, Pass pass, std::span<const Tensor> in) override {
    if (pass == Pass::forward) {
      Call c;
      c.node = node;
      for (const auto& t : in) c.inputs.push_back(t.defined() ? t.clone() : Tensor());
      index_[node.name] = calls.size();
      calls.push_back(std::move(c));
    } else {
      Call& c = calls.at(index_.at(node.name));
      c.backward = true;
      for (const auto& t : in) c.grad_outputs.push_back(t.defined() ? t.clone() : Tensor());
    }
    return true;
  }
  bool after_operator(const Node& node, Pass pass, std::span<const Tensor> out) override {
    if (pass == Pass::backward)
      for (const auto& g : out) calls.at(index_.at(node.name)).grads_given.push_back(g.defined());
    return true;
  }

 private:
  std::map<std::string, size_t> index_;
};

// The primary metric of a round: the ratio the workload computed.
class RoundRatio : public Metric {
 public:
  explicit RoundRatio(const double* value) : value_(value) {}
  std::string name() const override { return "framework_overhead"; }
  std::string unit() const override { return "ratio"; }
  void end() override { add_sample(*value_); }

 private:
  const double* value_;
};

// The operators one executor call ran, each created afresh and fed what the executor fed it.
class OperatorsAlone {
 public:
  // same_operators: an operator executor's own operators (create_operator_like); otherwise each
  // node's spec on op_backends.
  OperatorsAlone(GraphExecutor& ex, const CallRecorder& recorder, const std::string& loss,
                 const std::vector<std::string>& op_backends, int64_t workspace_limit, bool same_operators) {
    auto* op_executor = dynamic_cast<OperatorExecutor*>(&ex);
    for (const auto& c : recorder.calls) {
      Individual ind;
      if (same_operators) {
        // The very operator the executor runs (a layout variant in inference, see executors.md).
        ind.op = op_executor->create_operator_like(c.node.name, loss);
      } else {
        OpSpec spec = ex.network().spec(c.node.name);
        spec.workspace_limit = workspace_limit;
        ind.op = OpRegistry::global().create_with_fallback(spec, op_backends);
      }
      ind.call = &c;
      for (const auto& d : ind.op->output_descs()) ind.outputs.push_back(Tensor::uninitialized(d));
      if (c.backward) {  // the gradients the executor asked for
        ind.grad_inputs.resize(c.inputs.size());
        for (size_t i = 0; i < c.inputs.size() && i < c.grads_given.size(); ++i)
          if (c.grads_given[i]) ind.grad_inputs[i] = Tensor::uninitialized(c.inputs[i].desc());
      }
      calls_ += 1 + (c.backward ? 1 : 0);
      ops_.push_back(std::move(ind));
    }
  }

  // Forward of every operator, then backward in reverse, as the executor orders them (a
  // backward needs its own instance's latest forward). The sum of their times, in ns.
  int64_t run() {
    int64_t sum = 0;
    for (auto& o : ops_) {
      const int64_t a = wall_now_ns();
      o.op->forward(o.call->inputs, o.outputs);
      sum += wall_now_ns() - a;
    }
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      if (!it->call->backward) continue;
      const int64_t a = wall_now_ns();
      it->op->backward(it->call->grad_outputs, it->call->inputs, it->outputs, it->grad_inputs);
      sum += wall_now_ns() - a;
    }
    return sum;
  }
  int64_t calls() const { return calls_; }

 private:
  struct Individual {
    std::unique_ptr<Operator> op;
    const CallRecorder::Call* call;
    std::vector<Tensor> outputs, grad_inputs;
  };
  std::vector<Individual> ops_;
  int64_t calls_ = 0;
};

// Takes the user's events off an executor and gives them back when it goes, however the
// measurement ends: their cost is not the framework's.
class EventsSetAside {
 public:
  explicit EventsSetAside(GraphExecutor& ex) : ex_(ex), events_(ex.events()) { ex_.clear_events(); }
  ~EventsSetAside() {
    ex_.clear_events();
    for (const auto& e : events_) ex_.add_event(e);
  }
  EventsSetAside(const EventsSetAside&) = delete;
  EventsSetAside& operator=(const EventsSetAside&) = delete;

 private:
  GraphExecutor& ex_;
  std::vector<std::shared_ptr<ExecutorEvent>> events_;
};

}  // namespace

FrameworkOverhead framework_overhead(GraphExecutor& ex, const TensorMap& feeds, const std::string& loss,
                                     std::vector<std::string> op_backends, const RunSettings& settings) {
  // An operator executor says exactly where its operators come from; for others, guess from the
  // backend's name.
  int64_t workspace_limit = -1;
  auto* op_executor = dynamic_cast<OperatorExecutor*>(&ex);
  if (op_executor) {
    if (op_backends.empty()) op_backends = op_executor->backends();
    workspace_limit = op_executor->options().workspace_limit;
  }
  if (op_backends.empty()) {
    op_backends.push_back(ex.backend());
    if (ex.backend() != "reference") op_backends.push_back("reference");
  }
  // Only an operator executor compared with its own operators runs exactly the code it is
  // compared with; a framework's executor (LibTorch's graph) may legitimately beat deep500's
  // per-operator calls of the same library.
  const bool same_operators = op_executor && op_backends == op_executor->backends();
  const EventsSetAside set_aside(ex);
  auto run_executor = [&] { return loss.empty() ? ex.inference(feeds) : ex.inference_and_backprop(feeds, loss); };
  auto recorder = std::make_shared<CallRecorder>();
  ex.add_event(recorder);
  run_executor();
  ex.clear_events();
  OperatorsAlone alone(ex, *recorder, loss, op_backends, workspace_limit, same_operators);

  auto time_executor = [&] {
    const int64_t t0 = wall_now_ns();
    run_executor();
    return wall_now_ns() - t0;
  };
  std::vector<double> exec_times, op_times;
  double ratio = 0;
  int64_t rounds = 0;
  // Both sides of a ratio run back to back, and which goes first alternates, so that neither
  // always inherits the caches, clocks or scheduler state the other leaves behind.
  auto round = [&] {
    int64_t exec = 0, sum = 0;
    if (rounds++ % 2 == 0) {
      exec = time_executor();
      sum = alone.run();
    } else {
      sum = alone.run();
      exec = time_executor();
    }
    exec_times.push_back(static_cast<double>(exec) * 1e-9);
    op_times.push_back(static_cast<double>(sum) * 1e-9);
    ratio = sum > 0 ? static_cast<double>(exec) / static_cast<double>(sum) : std::numeric_limits<double>::infinity();
  };
  MetricSet metrics;
  metrics.add(std::make_unique<RoundRatio>(&ratio));
  FrameworkOverhead r;
  r.outcome = run_measured(round, metrics, settings);
  // Warm-up rounds are not samples.
  const size_t warm = exec_times.size() - metrics[0].samples().size();
  exec_times.erase(exec_times.begin(), exec_times.begin() + static_cast<std::ptrdiff_t>(warm));
  op_times.erase(op_times.begin(), op_times.begin() + static_cast<std::ptrdiff_t>(warm));
  const nlohmann::json info = {{"op_backends", op_backends},
                               {"mode", loss.empty() ? "inference" : "train-step"},
                               {"operator_calls_per_round", alone.calls()},
                               {"same_operators", same_operators}};
  r.ratio = record("framework_overhead", "ratio", metrics[0].samples(), info);
  r.executor_time = record("executor_time", "s", exec_times);
  r.operators_time = record("operators_time", "s", op_times);
  r.op_backends = op_backends;
  r.operators = alone.calls();
  if (same_operators) r.mistrust_reason = overhead_mistrust_reason(r.ratio);
  if (!r.mistrust_reason.empty()) {
    r.state = CaseState::Mistrusted;
    r.ratio.info["mistrusted"] = r.mistrust_reason;
  }
  return r;
}

std::string overhead_mistrust_reason(const MetricRecord& ratio) {
  if (!ratio.summary || !ratio.summary->median_ci.available) return "";
  const MedianCI& ci = ratio.summary->median_ci;
  if (ci.upper >= 1.0) return "";
  return fmt::format(
      "FrameworkOverhead's 95% CI [{:.3f}, {:.3f}] lies below 1: the executor runs the very operators it is "
      "compared with, so it cannot be faster than they are alone; the two sides ran under different "
      "conditions (other load on the cores, frequency changes). Rerun on an idle machine.",
      ci.lower, ci.upper);
}

// ---------------------------------------------------------------- latency and throughput

LatencyThroughput measure_latency(GraphExecutor& ex, const TensorMap& feeds, int64_t batch,
                                  const std::string& loss, const RunSettings& settings) {
  D5_CHECK_ARG(batch > 0, "measure_latency: batch must be positive, got {}", batch);
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  LatencyThroughput r;
  r.batch = batch;
  r.outcome = run_measured([&] { loss.empty() ? ex.inference(feeds) : ex.inference_and_backprop(feeds, loss); },
                           metrics, settings);
  r.latency = metrics[0].result();
  r.latency.name = "latency";
  std::vector<double> rate;
  for (double t : r.latency.samples) rate.push_back(t > 0 ? static_cast<double>(batch) / t : 0);
  r.throughput = record("throughput", "samples/s", rate, {{"derived_from", "latency"}, {"batch", batch}});
  return r;
}

namespace {

// The object boxes an SsdLoss reads: random uniform numbers are mostly boxes without area, which it
// refuses. Each box is a random anchor's, its centre moved by up to a quarter of the anchor and its
// sides scaled by 0.7-1.4, so that the loss has positives to match.
bool fill_detection_boxes(const Network& net, const std::string& name, Tensor& t, RngStream& rng) {
  for (const Node* c : net.consumers(name)) {
    if (c->op_type != "SsdLoss" || c->inputs.size() < 3 || c->inputs[2] != name) continue;
    const Tensor* known = net.known_value(c->inputs[1]);
    const Tensor a = known ? *known : net.fetch_tensor(c->inputs[1]);
    const int64_t count = a.shape()[0];
    if (count < 1 || t.numel() % 4 != 0) return false;
    for (int64_t b = 0; b < t.numel() / 4; ++b) {
      const auto k = static_cast<int64_t>(rng.below(static_cast<uint64_t>(count)));
      const double w = a.get(k * 4 + 2) - a.get(k * 4), h = a.get(k * 4 + 3) - a.get(k * 4 + 1);
      const double cx = a.get(k * 4) + w / 2 + rng.uniform(-0.25, 0.25) * w;
      const double cy = a.get(k * 4 + 1) + h / 2 + rng.uniform(-0.25, 0.25) * h;
      const double bw = w * rng.uniform(0.7, 1.4), bh = h * rng.uniform(0.7, 1.4);
      const double box[4] = {cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2};
      for (int64_t j = 0; j < 4; ++j) t.set(b * 4 + j, box[j]);
    }
    return true;
  }
  return false;
}

}  // namespace

TensorMap synthetic_feeds(const Network& net, uint64_t seed) {
  TensorMap feeds;
  for (const auto& name : net.inputs()) {
    const TensorDesc& d = net.desc(name);
    Tensor t(d);
    RngStream rng(seed, "feed/" + name);
    if (is_floating(d.dtype)) {
      if (!fill_detection_boxes(net, name, t, rng))
        for (int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.uniform(-1, 1));
    } else {
      int64_t bound = 0;  // exclusive upper bound of valid values; 0 = only zeros are known valid
      int64_t skip = -1;  // a value in [0, bound) that is not valid (CTC's blank)
      for (const Node* c : net.consumers(name)) {
        const bool second = c->inputs.size() > 1 && c->inputs[1] == name;
        const bool labels =
            (c->op_type == "SoftmaxCrossEntropyLoss" || c->op_type == "NegativeLogLikelihoodLoss") && second;
        const bool indices = c->op_type == "Gather" && second;
        if (c->op_type == "CTCLoss" && second) {
          // Label sequences: any class of the log-probabilities [T, N, C] but the blank.
          const auto& log_probs = net.desc(c->inputs[0]).shape;
          if (log_probs.rank() == 3 && log_probs[2] > 1) {
            bound = log_probs[2];
            skip = c->attrs.get_int("blank", 0);
          }
        } else if (c->op_type == "SsdLoss" && c->inputs.size() > 3 && c->inputs[3] == name) {
          // Object classes: the prediction [N, A, 4 + K] scores the background and K - 1 of them.
          const auto& prediction = net.desc(c->inputs[0]).shape;
          if (prediction.rank() == 3 && prediction[2] > 5) bound = prediction[2] - 5;
        } else if (labels) {
          const auto& scores = net.desc(c->inputs[0]).shape;
          if (scores.rank() >= 2) bound = scores[1];
        } else if (indices) {
          const auto& data = net.desc(c->inputs[0]).shape;
          int64_t axis = c->attrs.get_int("axis", 0);
          if (axis < 0) axis += static_cast<int64_t>(data.rank());
          if (axis >= 0 && axis < static_cast<int64_t>(data.rank())) bound = data[static_cast<size_t>(axis)];
        }
      }
      if (bound > 0) {
        const bool skipping = skip >= 0 && skip < bound;
        for (int64_t i = 0; i < t.numel(); ++i) {
          auto v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(skipping ? bound - 1 : bound)));
          if (skipping && v >= skip) ++v;
          t.set(i, static_cast<double>(v));
        }
      }
    }
    feeds[name] = std::move(t);
  }
  return feeds;
}

std::vector<CaseResult> batch_scaling(const std::function<Network(int64_t)>& make_network,
                                      const std::string& backend, const std::vector<int64_t>& batches,
                                      const std::string& loss, const RunSettings& settings, uint64_t seed) {
  std::vector<CaseResult> cases;
  for (int64_t batch : batches) {
    Network net = make_network(batch);
    auto ex = make_executor(net, backend);
    const auto feeds = synthetic_feeds(net, seed);
    const auto lt = measure_latency(*ex, feeds, batch, loss, settings);
    CaseResult c;
    c.name = fmt::format("{}/batch={}", net.name(), batch);
    c.level = "L1";
    c.backend = backend;
    c.params = {{"network", net.name()}, {"batch", batch}, {"mode", loss.empty() ? "inference" : "train-step"}};
    c.outcome = lt.outcome;
    c.metrics = {lt.latency, lt.throughput};
    c.detail = fmt::format("median {} per call, {:.1f} samples/s", format_seconds(lt.latency.summary->median),
                           lt.throughput.summary->median);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace d5
