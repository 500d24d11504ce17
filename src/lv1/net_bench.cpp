// One network on several executors. Every way a case ends is a state with a reason, as in
// Level 0's bench_problem: only results that match the reference are timed.
#include "deep500/net/net_bench.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/framework_memory.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/operator_executor.h"
#include "deep500/net/replaying_executor.h"
#include "deep500/metrics/reporter.h"
#include "deep500/metrics/standard_metrics.h"

namespace d5 {

const char* to_string(NetMode m) { return m == NetMode::Inference ? "inference" : "train-step"; }

NetMode parse_net_mode(const std::string& s) {
  for (auto m : {NetMode::Inference, NetMode::TrainStep})
    if (s == to_string(m)) return m;
  D5_THROW(InvalidArgument, "unknown mode '{}': use inference or train-step", s);
}

namespace {

MetricRecord single(const std::string& name, const std::string& unit, int64_t value,
                    const std::string& why_not) {
  MetricRecord r;
  r.name = name;
  r.unit = unit;
  if (value < 0) {
    r.available = false;
    r.unavailable_reason = why_not;
    return r;
  }
  r.samples = {static_cast<double>(value)};
  r.summary = summarize(r.samples);
  return r;
}

// The operator executor behind `ex` (itself, or the one a ReplayingExecutor wraps), or null.
OperatorExecutor* operator_executor_of(GraphExecutor& ex) {
  if (auto* replaying = dynamic_cast<ReplayingExecutor*>(&ex)) return dynamic_cast<OperatorExecutor*>(&replaying->wrapped());
  return dynamic_cast<OperatorExecutor*>(&ex);
}

// The devices other than the host that an operator executor runs nodes on (none for others).
std::vector<Device> devices_of(GraphExecutor& ex, const std::string& loss) {
  std::vector<Device> devices;
  auto add = [&](const Device& d) {
    if (!(d == Device::cpu()) && std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  };
  if (auto* op_ex = operator_executor_of(ex)) {
    for (const auto& n : op_ex->layouts(loss)) add(parse_device(n.device));
  } else {
    // An executor placed on a device as a whole (the torch executor's --device) reads its feeds there.
    for (const auto& [name, d] : ex.feed_devices(loss)) add(d);
  }
  return devices;
}

// Where tensors travel in a backend's own layout, and the reorders each forward call runs.
nlohmann::json layouts_json(OperatorExecutor& ex, const std::string& loss, bool native_layouts) {
  nlohmann::json nodes = nlohmann::json::array();
  int64_t reorders = 0, native = 0;
  for (const auto& n : ex.layouts(loss)) {
    reorders += n.reorders.inputs + n.reorders.outputs;
    // A layout on another device reads "cuda:0/plain": the device says where, not how.
    native += std::count_if(n.outputs.begin(), n.outputs.end(), [](const std::string& l) {
      const size_t slash = l.find('/');
      const std::string layout = slash == std::string::npos ? l : l.substr(slash + 1);
      return !layout.empty() && layout != "plain";
    });
    nodes.push_back({{"node", n.node},
                     {"inputs", n.inputs},
                     {"outputs", n.outputs},
                     {"input_reorders", n.reorders.inputs},
                     {"output_reorders", n.reorders.outputs}});
  }
  return {{"native_layouts", native_layouts},
          {"reorders_per_forward", reorders},
          {"native_tensors", native},
          {"nodes", nodes}};
}

struct ValidationOutcome {
  CaseState state = CaseState::Passed;
  std::string detail;
  nlohmann::json extra;
};

// The executor against the reference executor. Inputs that put a Relu input within rounding of 0
// cannot judge the gradients (the two executors legitimately switch it differently); the
// validation draws other inputs, up to 3 times, and says so. Timing uses the first inputs
// either way.
ValidationOutcome validate_against_reference(Network& net, GraphExecutor& ex, const TensorMap& feeds,
                                             const std::string& loss, uint64_t seed) {
  ReferenceExecutor ref(net);
  auto check = loss.empty() ? test_executor(ex, feeds, ref) : test_executor_backprop(ex, feeds, loss, ref);
  int redraws = 0;
  std::vector<std::string> first_why;
  while (!loss.empty() && check.state == CaseState::Mistrusted && check.extra.contains("kink_crossings") &&
         redraws < 3) {
    first_why.push_back(check.extra["kink_crossings"].get<std::string>());
    ++redraws;
    check = test_executor_backprop(ex, synthetic_feeds(net, seed + static_cast<uint64_t>(redraws)), loss, ref);
  }
  ValidationOutcome v{check.state, check.detail, check.extra};
  if (redraws > 0) {
    v.extra["redrawn_inputs"] = {{"times", redraws}, {"because", first_why}};
    if (v.state == CaseState::Passed)
      v.detail += fmt::format(" (on inputs drawn again {} time(s): {})", redraws, first_why.front());
  }
  return v;
}

// NetBenchOptions::resident_io: the executor's outputs stay where they are made, and the feeds it
// is given from now on are copies on the devices it reads them on (recorded in the case's
// params); an executor that reads its feeds on the host keeps `feeds`.
TensorMap resident_io(GraphExecutor* ex, const TensorMap& feeds, const std::string& loss, CaseResult& c) {
  const auto devices = ex->feed_devices(loss);
  if (devices.empty() || !ex->keep_outputs_on_device()) {
    c.params["resident_io"] = "not applicable: the executor reads its feeds and returns its outputs on the host";
    return feeds;
  }
  TensorMap placed;
  nlohmann::json where = nlohmann::json::object();
  for (const auto& [name, device] : devices) {
    placed[name] = feeds.at(name).to(device);
    where[name] = device.to_string();
  }
  c.params["resident_io"] = where;
  return placed;
}

CaseResult bench_one(Network& net, const std::string& backend, const TensorMap& feeds, int64_t batch,
                     const NetBenchOptions& o) {
  const std::string loss = o.mode == NetMode::TrainStep ? o.loss : "";
  CaseResult c;
  c.name = fmt::format("{}/{}", net.name(), backend);
  c.level = "L1";
  c.backend = backend;
  c.params = {{"network", net.name()},
              {"mode", to_string(o.mode)},
              {"batch", batch},
              {"nodes", net.nodes().size()},
              {"parameters", net.parameter_count()}};
  if (!loss.empty()) c.params["loss"] = loss;
  auto finish = [&](CaseState s, std::string detail) {
    c.state = s;
    c.detail = std::move(detail);
    return c;
  };

  // A backend this build left out is skipped with the reason; a name deep500 does not have is a
  // usage error, never a skip; a built backend without an executor is UNIMPLEMENTED (below).
  const auto known = executor_backends();
  if (std::find(known.begin(), known.end(), backend) == known.end()) {
    if (is_not_built_backend(backend))
      return finish(CaseState::Skipped, fmt::format("this d5 was built without the {} backend, so it has no {} "
                                                    "executor (docs/building.md)",
                                                    backend, backend));
    if (!find_backend(backend))
      throw InvalidArgument(fmt::format("no backend '{}' (executors: {})", backend, fmt::join(known, ", ")));
  }
  std::unique_ptr<GraphExecutor> ex;
  try {
    ExecutorOptions eo;
    eo.workspace_limit = o.workspace_limit;
    eo.pins = o.pins;
    eo.deterministic = o.deterministic;
    eo.native_layouts = o.native_layouts;
    eo.device = o.device;
    eo.cuda_graphs = o.cuda_graphs;
    ex = make_executor(net, backend, eo);
  } catch (const Unimplemented& e) {
    return finish(CaseState::Unimplemented, e.what());
  }
  c.extra["implementations"] = ex->implementations();
  nlohmann::json fallbacks = nlohmann::json::array();
  for (const auto& [node, why] : ex->fallbacks()) fallbacks.push_back({{"node", node}, {"reason", why}});
  c.extra["fallbacks"] = fallbacks;
  if (auto* op_ex = operator_executor_of(*ex)) c.extra["layouts"] = layouts_json(*op_ex, loss, o.native_layouts);
  auto* replaying = dynamic_cast<ReplayingExecutor*>(ex.get());
  if (replaying) {
    // The first call of the step runs as usual and the second is recorded: validation then
    // checks replays.
    for (int i = 0; i < 2; ++i) {
      if (loss.empty()) ex->inference(feeds);
      else ex->inference_and_backprop(feeds, loss);
    }
  }

  std::string detail;
  if (o.validate && (backend != "reference" || o.oracle)) {
    const ValidationOutcome v = validate_against_reference(o.oracle ? *o.oracle : net, *ex, feeds, loss, o.seed);
    c.extra["validation"] = v.extra;
    if (v.state != CaseState::Passed) return finish(v.state, v.detail);
    detail = v.detail;
  } else if (o.validate) {
    detail = "the reference executor (the oracle, not validated against itself)";
  }

  const TensorMap timed_feeds = o.resident_io ? resident_io(ex.get(), feeds, loss, c) : feeds;
  auto step = [&] {
    return loss.empty() ? ex->inference(timed_feeds) : ex->inference_and_backprop(timed_feeds, loss);
  };
  const auto lt = measure_latency(*ex, timed_feeds, batch, loss, o.run);
  // One more call under the process's and the devices' high-water marks, so that measuring them
  // costs no timed call; it is a steady-state call, whose copies between devices are counted.
  const std::vector<Device> devices = devices_of(*ex, loss);
  const FrameworkMemoryProbe* framework = framework_memory_probe(backend);
  for (const Device d : devices) {
    allocator_for(d).reset_peak(d.index);
    if (framework) framework->reset_peak(d);
  }
  PeakRss rss;
  rss.begin();
  step();
  rss.end();
  const ExecutorMemory mem = ex->memory();
  c.outcome = lt.outcome;
  c.metrics = {
      lt.latency, lt.throughput,
      single("peak_tensor_bytes", "bytes", mem.peak_tensor_bytes, "the executor does not account tensors"),
      rss.result()};
  // Executors that place tensors on devices count their copies: operator executors, and the
  // torch executor on a device.
  if (operator_executor_of(*ex) || !o.device.empty()) {
    c.metrics.push_back(single("transfers", "copies", mem.transfers, ""));
    c.metrics.push_back(single("transfer_bytes", "bytes", mem.transfer_bytes, ""));
  }
  for (const Device d : devices) {
    MetricRecord peak = single("device_peak_bytes", "bytes", allocator_for(d).stats(d.index).peak_bytes, "");
    peak.info = {{"device", d.to_string()}, {"allocator", "d5's"}};
    c.metrics.push_back(std::move(peak));
    if (!framework) continue;
    // Memory the framework allocated itself: with d5's, what the executor held on the device.
    const FrameworkDeviceMemory f = framework->read(d);
    MetricRecord fpeak = single("framework_device_peak_bytes", "bytes", f.peak_bytes.value_or(-1), f.unavailable_reason);
    fpeak.info = {{"device", d.to_string()}, {"allocator", f.allocator}};
    c.metrics.push_back(std::move(fpeak));
  }
  if (o.breakdown) {
    auto timer = std::make_shared<NodeTimer>();
    ex->add_event(timer);
    for (int i = 0; i < std::max(5, o.run.min_runs); ++i) step();
    ex->remove_event(timer);
    c.extra["breakdown"] = to_json(breakdown(*timer, ex->implementations()));
  }
  if (replaying) {
    const ReplayReport& r = replaying->report();
    c.params["cuda_graphs"] = replay_report_json(*ex);
    // The timed calls and the one under the high-water marks were steady-state calls: replays,
    // unless the step could not be recorded.
    if (r.replays == 0)
      return finish(CaseState::Unimplemented,
                    fmt::format("--cuda-graphs: the step was never replayed: {}", r.last_unrecorded_why));
    detail += fmt::format("{}{} replays of a CUDA graph", detail.empty() ? "" : "; ", r.replays);
  }
  std::string overhead_mistrusted;
  if (o.overhead) {
    const auto fo = framework_overhead(*ex, timed_feeds, loss, {}, o.run);
    c.metrics.push_back(fo.ratio);
    c.metrics.push_back(fo.executor_time);
    c.metrics.push_back(fo.operators_time);
    overhead_mistrusted = fo.mistrust_reason;
  }
  detail = fmt::format("{}{}median {} per {}, {:.1f} samples/s", detail, detail.empty() ? "" : "; ",
                       format_seconds(lt.latency.summary->median), loss.empty() ? "inference" : "training step",
                       lt.throughput.summary->median);
  // The latency stands, but a case whose overhead is noise is not reported as a finding.
  if (!overhead_mistrusted.empty()) return finish(CaseState::Mistrusted, overhead_mistrusted + " (" + detail + ")");
  return finish(CaseState::Passed, detail);
}

}  // namespace

std::vector<CaseResult> bench_network(Network& net, const NetBenchOptions& o) {
  net.infer();
  D5_CHECK_ARG(o.mode == NetMode::Inference || !o.loss.empty(),
               "network '{}': train-step mode needs the loss tensor's name", net.name());
  if (!o.loss.empty() && o.mode == NetMode::TrainStep)
    D5_CHECK_ARG(net.producer(o.loss), "network '{}': loss '{}' is not the output of any node", net.name(),
                 o.loss);
  int64_t batch = o.batch;
  if (batch <= 0) {
    batch = 1;
    const auto& inputs = net.inputs();
    if (!inputs.empty() && net.desc(inputs[0]).shape.rank() > 0) batch = net.desc(inputs[0]).shape[0];
  }
  const TensorMap feeds = synthetic_feeds(net, o.seed);
  std::vector<std::string> backends = o.backends.empty() ? executor_backends() : o.backends;
  std::vector<CaseResult> cases;
  for (const auto& b : backends) cases.push_back(bench_one(net, b, feeds, batch, o));
  return cases;
}

}  // namespace d5
