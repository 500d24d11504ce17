// The list of d5's commands (cli_common.h): a new command is its cmd_*.cpp and one line here.
#include "cli_common.h"

namespace d5::cli {

const Registry<CommandFactory>& command_registry() {
  static const Registry<CommandFactory>* r = [] {
    auto* reg = new Registry<CommandFactory>("command");
    reg->add("info", "the manifest of build, libraries, backends and host", register_info);
    reg->add("stats", "statistics of raw samples", register_stats);
    reg->add("ops", "operators: coverage per backend, benchmarks of problem suites", register_ops);
    reg->add("onnx-test", "ONNX conformance of a backend's operators and whole models", register_onnx_test);
    reg->add("peak", "this machine's measured FMA rate and memory bandwidth", register_peak);
    reg->add("models", "the model zoo: list, export to ONNX", register_models);
    reg->add("net", "a network on graph executors: validation, latency, breakdown, overhead", register_net);
    reg->add("data", "datasets: formats, verified downloads, info", register_data);
    reg->add("divergence", "per-step drift between two optimizers' trajectories", register_divergence);
    reg->add("train", "a network trained on a dataset, one process or distributed", register_train);
    reg->add("compare", "two result files case by case, a regression gate", register_compare);
    reg->add("run", "a recipe executed: result files, criteria, VALID/INVALID", register_run);
    reg->add("report", "result files as one HTML page", register_report);
    reg->add("rerun", "an experiment run again from its manifest and compared", register_rerun);
    reg->add("scaling", "one training run on several rank counts through mpirun", register_scaling);
    reg->add("serve-bench", "inference scenarios (single-stream, multi-stream, offline, server) after MLPerf LoadGen", register_serve_bench);
    reg->add("db", "the result history: import, query, history, regressions", register_db);
    reg->add("tune", "hyper-parameter search over a recipe's mutable options, with its cost", register_tune);
    reg->add("rl", "reinforcement learning: agents on C++ environments, time to solved over seeds", register_rl);
    return reg;
  }();
  return *r;
}

}  // namespace d5::cli
