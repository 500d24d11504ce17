// Native layouts in the oneDNN executor (docs/executors.md, "Native layouts"): the same network
// on two oneDNN executors, interleaved round by round in one process:
//   plain   every operator exchanges plain row-major tensors: each convolution reorders its
//           input into the blocked layout it chose and its output back
//   native  a tensor stays in the layout oneDNN chose while its readers are oneDNN operators
// Reported per model: each side's activation reorders per forward call, its median inference time
// with a 95% CI over rounds, and the ratio plain / native (> 1: native layouts are faster), with
// its 95% CI. Models: the zoo's ResNet-18 (224x224) and LeNet-5, batch 1 by default.
#include <algorithm>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "deep500/core/rng.h"

namespace {

using namespace d5;
using namespace d5::bench;

int64_t reorders_per_forward(OperatorExecutor& ex) {
  int64_t n = 0;
  for (const auto& l : ex.layouts()) n += l.reorders.inputs + l.reorders.outputs;
  return n;
}

void compare(const std::string& model, int64_t batch, int rounds, int runs) {
  ModelOptions mo;
  mo.batch = batch;
  Network net = build_model(model, mo);
  Tensor x(net.desc(kZooInput));
  RngStream rng(1, "native-layouts-input");
  for (float& v : x.span<float>()) v = rng.uniform_float();
  const TensorMap feeds{{kZooInput, x}};

  struct Side {
    const char* name;
    std::unique_ptr<OperatorExecutor> ex;
    std::vector<double> medians;
  };
  std::vector<Side> sides;
  for (const bool native : {false, true}) {
    OperatorExecutorOptions o;
    o.native_layouts = native;
    sides.push_back({native ? "native" : "plain",
                     std::make_unique<OperatorExecutor>(net, "onednn", std::vector<std::string>{"onednn", "reference"}, o),
                     {}});
  }
  std::vector<double> ratio;
  for (int r = 0; r <= rounds; ++r) {
    // Alternate which side goes first, so drift and frequency changes hit both alike.
    for (size_t i = 0; i < sides.size(); ++i) {
      Side& s = sides[(i + static_cast<size_t>(r)) % sides.size()];
      const double m = median(hand_loop([&] { s.ex->inference(feeds); }, runs));
      if (r > 0) s.medians.push_back(m);  // round 0 warms up
    }
    if (r > 0) ratio.push_back(sides[0].medians.back() / sides[1].medians.back());
  }
  std::cout << fmt::format("== {} batch {} ({} rounds of {} runs)\n", model, batch, rounds, runs);
  for (auto& s : sides) {
    std::vector<double> ms;
    for (double v : s.medians) ms.push_back(v * 1e3);
    std::cout << fmt::format("  {:<7} {:>3} activation reorders per call   {} ms\n", s.name,
                             reorders_per_forward(*s.ex), with_ci(ms, "{:.3f}"));
  }
  std::cout << fmt::format("  plain / native: {}  (> 1: native layouts are faster)\n", with_ci(ratio));
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv, {{"batch", "1"}, {"rounds", "20"}, {"runs", "5"}, {"models", "resnet18,lenet5"}});
  register_builtin_operators();
  const auto known = executor_backends();
  if (std::find(known.begin(), known.end(), "onednn") == known.end()) {
    std::cout << "no oneDNN executor in this build\n";
    return 0;
  }
  const int rounds = args.integer("rounds"), runs = args.integer("runs");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  for (const auto& model : args.list("models")) compare(model, args.integer("batch"), rounds, runs);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_native_layouts: " << e.what() << "\n";
  return 1;
}
