// d5 net: one network on every requested executor: a check against the reference executor, then
// latency, throughput and memory, and on request the per-node breakdown and FrameworkOverhead.
#include <unistd.h>

#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/error.h"
#include "deep500/executor_metrics.h"
#include "deep500/manifest.h"
#include "deep500/net_bench.h"
#include "deep500/op_registry.h"
#include "deep500/reporter.h"
#include "net_loader.h"

namespace d5::cli {

namespace {

struct NetOpts {
  OutputOptions out;
  std::string model, mode = "inference", loss;
  std::vector<std::string> backends;
  int64_t batch = 1;
  bool breakdown = false, overhead = false, no_validate = false;
  double max_time = 5;
  int min_runs = 10;
};

std::string console_text(const Results& res) {
  std::ostringstream s;
  make_reporter("console")->write(res, s);
  for (const auto& c : res.cases) {
    if (c.extra.contains("fallbacks") && !c.extra["fallbacks"].empty()) {
      s << fmt::format("\n{}: {} node(s) fell back\n", c.name, c.extra["fallbacks"].size());
      for (const auto& f : c.extra["fallbacks"])
        s << fmt::format("  {:<28} {}\n", f["node"].get<std::string>(), f["reason"].get<std::string>());
    }
    if (c.extra.contains("breakdown"))
      s << fmt::format("\nbreakdown of {}:\n{}", c.name, format_breakdown(breakdown_from_json(c.extra["breakdown"])));
  }
  return s.str();
}

int run_net(const NetOpts& o, const GlobalOptions& g) {
  register_builtin_operators();
  ExperimentSettings settings = settings_from(g);
  const NetMode mode = parse_net_mode(o.mode);
  LoadedNetwork loaded = load_network(o.model, o.batch, mode);

  NetBenchOptions bo;
  bo.backends = o.backends;
  bo.mode = mode;
  bo.loss = o.loss.empty() ? loaded.loss : o.loss;
  bo.batch = 0;  // the loaded network's first input dimension
  bo.validate = !o.no_validate;
  bo.breakdown = o.breakdown;
  bo.overhead = o.overhead;
  bo.run.max_seconds = o.max_time;
  bo.run.min_runs = o.min_runs;
  bo.seed = settings.stream("net/feeds").seed();
  if (isatty(STDERR_FILENO)) std::cerr << "d5: " << loaded.network.summary() << "\n";

  Results res;
  res.cases = bench_network(loaded.network, bo);
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {{"model", o.model},          {"source", loaded.source},
                           {"network", loaded.network.summary()}, {"mode", o.mode},
                           {"batch", o.batch},          {"loss", bo.loss},
                           {"max_time_s", o.max_time}};
  emit_text(console_text(res), to_json(res), o.out);
  return exit_code_for(res);
}

}  // namespace

Command register_net(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("net", "Run a network on graph executors: validation, latency, throughput, memory, "
                                        "time breakdown, FrameworkOverhead");
  auto o = std::make_shared<NetOpts>();
  cmd->add_option("model", o->model, "An ONNX file (MODEL.onnx) or a model zoo name (see 'd5 models list')")
      ->required();
  cmd->add_option("--backend", o->backends, "Executors, comma-separated (default: every executor built in)")
      ->delimiter(',');
  cmd->add_option("--mode", o->mode, "inference, or train-step (forward and backward from the loss)")
      ->check(CLI::IsMember({"inference", "train-step"}))
      ->default_val("inference");
  cmd->add_option("--batch", o->batch, "Batch size (the first dimension of the inputs)")
      ->check(CLI::PositiveNumber)
      ->default_val(1);
  cmd->add_option("--loss", o->loss, "Loss tensor for train-step (zoo models: 'loss')");
  cmd->add_flag("--breakdown", o->breakdown, "Time per node and per op type, both passes");
  cmd->add_flag("--overhead", o->overhead, "Measure FrameworkOverhead: executor time / the same operators alone");
  cmd->add_flag("--no-validate", o->no_validate, "Skip the comparison with the reference executor");
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
