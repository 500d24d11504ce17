// d5 net: one network on every requested executor: a check against the reference executor, then
// latency, throughput and memory, and on request the per-node breakdown and FrameworkOverhead.
#include <unistd.h>

#include <iostream>
#include <map>
#include <sstream>

#include <optional>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/implementation_pins.h"
#include "deep500/metrics/manifest.h"
#include "deep500/net/microbatch.h"
#include "deep500/net/net_bench.h"
#include "deep500/op/op_registry.h"
#include "deep500/metrics/reporter.h"
#include "net_loader.h"

namespace d5::cli {

namespace {

struct NetOpts {
  OutputOptions out;
  std::string model, mode = "inference", loss, device;
  std::vector<std::string> backends;
  std::vector<int64_t> batches{1};
  bool breakdown = false, overhead = false, no_validate = false, plain_layouts = false, resident_io = false,
       cuda_graphs = false;
  double max_time = 5;
  int min_runs = 10;
  int64_t microbatch_limit = -1, workspace_limit = -1;
  std::vector<std::string> pins;
};

// Plans and applies micro-batching (docs/microbatching.md); returns the plan as JSON and prints
// it unless the output is JSON.
nlohmann::json microbatch(Network& net, const NetOpts& o) {
  MicrobatchOptions mo;
  mo.workspace_limit = o.microbatch_limit;
  mo.pins = parse_implementation_pins(o.pins);
  // Convolutions are timed on the first executor's backend: the one the plan is for.
  mo.backend = o.backends.empty() ? "reference" : o.backends.front();
  const MicrobatchPlan plan = plan_microbatches(net, mo);
  const int changed = apply_microbatches(net, plan);
  nlohmann::json j = {{"workspace_limit", plan.workspace_limit}, {"backend", mo.backend}, {"split", changed}};
  std::ostringstream s;
  s << fmt::format("micro-batching under a workspace limit of {} bytes ({} convolution(s) split):\n",
                   plan.workspace_limit, changed);
  for (const auto& c : plan.convs) {
    j["convs"].push_back({{"node", c.node}, {"batch", c.batch}, {"micro_batches", c.micro_batches},
                          {"time_before_s", c.time_before_s}, {"time_after_s", c.time_after_s},
                          {"workspace_before", c.workspace_before}, {"workspace_after", c.workspace_after}});
    // A whole batch no algorithm (or the pinned one) fits under the limit has no time.
    const std::string before = c.workspace_before < 0 ? std::string("does not fit")
                                                      : fmt::format("{:.3f} ms, workspace {} bytes", c.time_before_s * 1e3,
                                                                    c.workspace_before);
    s << fmt::format("  {:<24} batch {:>4} -> [{}]  whole batch: {}; plan: {:.3f} ms, workspace {} bytes\n", c.node,
                     c.batch, fmt::join(c.micro_batches, ","), before, c.time_after_s * 1e3, c.workspace_after);
  }
  if (o.out.format != "json") std::cerr << s.str();
  return j;
}

std::string console_text(const Results& res) {
  std::ostringstream s;
  make_reporter("console")->write(res, s);
  for (const auto& c : res.cases) {
    if (c.extra.contains("fallbacks") && !c.extra["fallbacks"].empty()) {
      s << fmt::format("\n{}: {} node(s) fell back\n", c.name, c.extra["fallbacks"].size());
      for (const auto& f : c.extra["fallbacks"])
        s << fmt::format("  {:<28} {}\n", f["node"].get<std::string>(), f["reason"].get<std::string>());
    }
    if (c.extra.contains("layouts") && c.extra["layouts"]["native_tensors"].get<int64_t>() > 0)
      s << fmt::format("\n{}: {} tensor(s) kept in backend layouts, {} activation reorder(s) per forward call\n",
                       c.name, c.extra["layouts"]["native_tensors"].get<int64_t>(),
                       c.extra["layouts"]["reorders_per_forward"].get<int64_t>());
    if (c.extra.contains("breakdown"))
      s << fmt::format("\nbreakdown of {}:\n{}", c.name,
                       format_breakdown(breakdown_from_json(c.extra["breakdown"])));
  }
  return s.str();
}

// Throughput against batch size, one row per executor, when several batch sizes ran.
std::string scaling_table(const Results& res, const std::vector<int64_t>& batches) {
  if (batches.size() < 2) return "";
  std::map<std::string, std::map<int64_t, std::string>> cells;
  for (const auto& c : res.cases) {
    std::string cell = to_string(c.state);
    for (const auto& m : c.metrics)
      if (m.name == "throughput" && m.summary) cell = fmt::format("{:.1f}", m.summary->median);
    cells[c.backend][c.params.value("batch", int64_t{0})] = cell;
  }
  std::string s = fmt::format("\nthroughput (samples/s, median) against batch size\n  {:<12}", "executor");
  for (int64_t b : batches) s += fmt::format(" {:>12}", b);
  s += "\n";
  for (const auto& [backend, row] : cells) {
    s += fmt::format("  {:<12}", backend);
    for (int64_t b : batches) s += fmt::format(" {:>12}", row.count(b) ? row.at(b) : "-");
    s += "\n";
  }
  return s;
}

int run_net(const NetOpts& o, const GlobalOptions& g) {
  register_builtin_operators();
  ExperimentSettings settings = settings_from(g);
  const NetMode mode = parse_net_mode(o.mode);

  NetBenchOptions bo;
  bo.backends = o.backends;
  bo.mode = mode;
  bo.batch = 0;  // the loaded network's first input dimension
  bo.validate = !o.no_validate;
  bo.breakdown = o.breakdown;
  bo.overhead = o.overhead;
  bo.run.max_seconds = o.max_time;
  bo.run.min_runs = o.min_runs;
  bo.seed = settings.stream("net/feeds").seed();
  bo.deterministic = settings.deterministic;

  // Micro-batches are planned to fit the limit, so the executors then run under it too.
  bo.workspace_limit = o.workspace_limit >= 0 ? o.workspace_limit : o.microbatch_limit;
  bo.pins = parse_implementation_pins(o.pins);
  bo.native_layouts = !o.plain_layouts;
  bo.resident_io = o.resident_io;
  bo.cuda_graphs = o.cuda_graphs;
  bo.device = o.device;

  Results res;
  nlohmann::json microbatching;  // per batch size, when micro-batching
  std::string source, summary;
  for (int64_t batch : o.batches) {
    LoadedNetwork loaded = load_network(o.model, batch, mode);
    bo.loss = o.loss.empty() ? loaded.loss : o.loss;
    source = loaded.source;
    summary = loaded.network.summary();
    if (isatty(STDERR_FILENO)) std::cerr << "d5: " << summary << ", batch " << batch << "\n";
    // The network as loaded validates the micro-batched one, on every backend.
    std::optional<Network> original;
    bo.oracle = nullptr;
    if (o.microbatch_limit >= 0) {
      original = loaded.network;
      bo.oracle = &*original;
      microbatching[std::to_string(batch)] = microbatch(loaded.network, o);
    }
    for (auto& c : bench_network(loaded.network, bo)) {
      // Several batch sizes: the batch is part of the case's name.
      if (o.batches.size() > 1) c.name = fmt::format("{}/batch={}/{}", loaded.network.name(), batch, c.backend);
      res.cases.push_back(std::move(c));
    }
  }
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {{"model", o.model},        {"source", source},     {"network", summary},
                           {"mode", o.mode},          {"batches", o.batches}, {"loss", bo.loss},
                           {"max_time_s", o.max_time}};
  if (!microbatching.is_null()) res.manifest["extra"]["microbatching"] = microbatching;
  emit_text(console_text(res) + scaling_table(res, o.batches), to_json(res), o.out);
  return exit_code_for(res);
}

}  // namespace

Command register_net(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("net",
                                 "Run a network on graph executors: validation, latency, throughput, memory, "
                                 "time breakdown, FrameworkOverhead");
  auto o = std::make_shared<NetOpts>();
  cmd->add_option("model", o->model, "An ONNX file (MODEL.onnx) or a model zoo name (see 'd5 models list')")
      ->required();
  cmd->add_option("--backend", o->backends, "Executors, comma-separated (default: every executor built in)")
      ->delimiter(',');
  cmd->add_option("--mode", o->mode, "inference, or train-step (forward and backward from the loss)")
      ->check(CLI::IsMember({"inference", "train-step"}))
      ->default_val("inference");
  cmd->add_option("--batch", o->batches,
                  "Batch size (the first dimension of the inputs); several, comma-separated, for throughput "
                  "against batch size")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->default_str("1");
  cmd->add_option("--loss", o->loss, "Loss tensor for train-step (zoo models: 'loss')");
  cmd->add_option("--microbatch-limit", o->microbatch_limit,
                  "Workspace limit per operator call (bytes): split convolutions into micro-batches that fit it, "
                  "timed and chosen by an exact DP (docs/microbatching.md)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workspace-limit", o->workspace_limit,
                  "Workspace limit per operator call (bytes) for the executors; implementations that need more "
                  "refuse and a leaner one runs (default: --microbatch-limit, else each implementation's own)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--pin", o->pins,
                  "OP=IMPLEMENTATION: run every node of OP with that implementation, no fallback (e.g. "
                  "Conv=reference:batched-im2col; 'd5 ops list --why' names them); repeatable")
      ->delimiter(',');
  cmd->add_flag("--breakdown", o->breakdown, "Time per node and per op type, both passes");
  cmd->add_flag("--overhead", o->overhead,
                "Measure FrameworkOverhead: executor time / the same operators alone");
  cmd->add_flag("--no-validate", o->no_validate, "Skip the comparison with the reference executor");
  cmd->add_flag("--resident-io", o->resident_io,
                "After validation, operator executors get their feeds placed once on the device their readers run on "
                "and leave their outputs there: timed calls copy nothing between host and device (docs/net.md)");
  cmd->add_flag("--cuda-graphs", o->cuda_graphs,
                "Record the step once as a CUDA graph and replay it (cuda executor; docs/cuda-graphs.md)");
  cmd->add_option("--device", o->device,
                  "Where the torch executor keeps its tensors (cpu, cuda:0): parameters moved there once, feeds copied "
                  "in, outputs copied out, counted as transfers (docs/torch-executor.md#devices); other executors run "
                  "on their backend's device and refuse one");
  cmd->add_flag("--plain-layouts", o->plain_layouts,
                "Operator executors pass plain tensors between all operators (no native layouts across the graph: "
                "each oneDNN primitive reorders at its own boundary)");
  cmd->add_option("--min-runs", o->min_runs, "Measured runs per executor at least")
      ->check(CLI::Range(1, 100000))
      ->default_val(10);
  cmd->add_option("--max-time", o->max_time, "Seconds of measured runs per executor at most")
      ->check(CLI::PositiveNumber)
      ->default_val(5.0);
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_net(*o, g); }};
}

}  // namespace d5::cli
