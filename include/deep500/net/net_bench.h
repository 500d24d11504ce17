#pragma once
// Level 1 benchmarking of one network on several executors: what `d5 net` runs (docs/net.md).
// Per executor: a check against the reference executor (outputs, and in train-step mode every
// parameter gradient), latency and throughput, peak tensor bytes and RSS, and on request the
// per-node time breakdown and FrameworkOverhead. The network comes from the caller, so ONNX
// files, zoo models and hand-built networks are benchmarked alike.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deep500/net/network.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"

namespace d5 {

enum class NetMode { Inference, TrainStep };
const char* to_string(NetMode m);
NetMode parse_net_mode(const std::string& s);  // "inference" | "train-step"; InvalidArgument otherwise

struct NetBenchOptions {
  std::vector<std::string> backends;  // executor names; empty: every registered executor
  NetMode mode = NetMode::Inference;
  std::string loss;        // train-step: the loss tensor (required)
  int64_t batch = 0;       // reported as the batch size (throughput = batch / latency); 0: the first
                           // dimension of the first graph input
  bool validate = true;    // compare with the reference executor first; a FAILED case is not timed
  bool breakdown = false;  // per-node and per-op-type times (extra "breakdown")
  bool overhead = false;   // FrameworkOverhead (metric "framework_overhead")
  RunSettings run;
  uint64_t seed = 0x5eed;  // synthetic feeds
  int64_t workspace_limit = -1;  // per-operator scratch memory for the executors (bytes); -1: none
  std::map<std::string, std::string> pins = {};  // ExecutorOptions::pins
  bool deterministic = false;                    // ExecutorOptions::deterministic
  bool native_layouts = true;                    // ExecutorOptions::native_layouts
  std::string device = {};                       // ExecutorOptions::device (the torch executor's)
  // After validation, operator executors get their feeds placed once on the device their readers
  // run on and leave their outputs there (OperatorExecutorOptions::outputs_on_device): the timed
  // calls copy nothing between host and device, as a framework step whose batch is already on the
  // GPU. Other executors run as without it.
  bool resident_io = false;
  // ExecutorOptions::cuda_graphs: steady-state calls replay a recorded step (docs/cuda-graphs.md).
  // The executor records before validation, so that validation checks replayed calls; a case
  // whose timed calls were not replays is UNIMPLEMENTED with the reason.
  bool cuda_graphs = false;
  // The network the reference executor validates against when `net` was rewritten (micro-batched
  // convolutions): the untransformed one, so that every backend, the reference one included, is
  // checked against what the network computed before the rewrite. Null: `net` itself.
  Network* oracle = nullptr;
};

// One case per executor named "<network>/<backend>". Executors that are not registered are
// SKIPPED; a network an executor cannot run is UNIMPLEMENTED with the reason.
std::vector<CaseResult> bench_network(Network& network, const NetBenchOptions& options);

}  // namespace d5
