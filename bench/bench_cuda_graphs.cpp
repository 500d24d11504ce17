// CUDA graphs (docs/cuda-graphs.md): the same network on two cuda executors, interleaved round by
// round in one process:
//   plain    the cuda executor: every kernel and library call launched from the host, every step
//   graphs   --cuda-graphs: the step recorded once as a CUDA graph and replayed
// Each call returns its outputs (the loss of a training step) on the host, so a timed call ends
// when the GPU's work does. Reported per model: each side's median step time with a 95% CI over
// rounds, the ratio plain / graphs (> 1: graphs are faster) with its 95% CI, and the graphs side's
// replay counts. The two sides' outputs are compared once: a replay must compute what the plain
// step computes. Models: the zoo's LeNet-5 and ResNet-20 at batch 16, training steps by default.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/model_zoo.h"
#include "deep500/net/replaying_executor.h"
#include "deep500/net/tensor_names.h"

namespace {

using namespace d5;
using namespace d5::bench;

double largest_gap(const TensorMap& a, const TensorMap& b) {
  double gap = 0;
  for (const auto& [name, want] : b) {
    const Tensor got = a.at(name).to(Device::cpu()), w = want.to(Device::cpu());
    for (int64_t i = 0; i < w.numel(); ++i) gap = std::max(gap, std::abs(got.get(i) - w.get(i)));
  }
  return gap;
}

void compare(const std::string& model, int64_t batch, bool train, int rounds, int runs) {
  ModelOptions mo;
  mo.batch = batch;
  mo.with_loss = train;
  mo.training = train;
  const Network original = build_model(model, mo);
  const TensorMap feeds = synthetic_feeds(original, 1);
  const std::string loss = train ? kZooLoss : "";
  struct Side {
    const char* name;
    Network net;
    std::unique_ptr<GraphExecutor> ex;
    std::vector<double> medians;
    TensorMap step(const TensorMap& f, const std::string& l) {
      return l.empty() ? ex->inference(f) : ex->inference_and_backprop(f, l);
    }
  };
  std::vector<Side> sides(2);
  for (int i = 0; i < 2; ++i) {
    sides[i].name = i == 0 ? "plain" : "graphs";
    sides[i].net = original;
    ExecutorOptions o;
    o.cuda_graphs = i == 1;
    sides[i].ex = make_executor(sides[i].net, "cuda", o);
  }
  // Three calls each: the graphs side's first runs as usual and its second records; the third is a
  // replay, compared with the plain side's third.
  TensorMap out[2];
  for (int call = 0; call < 3; ++call)
    for (int i = 0; i < 2; ++i) out[i] = sides[i].step(feeds, loss);
  const double gap = largest_gap(out[1], out[0]);
  std::vector<double> ratio;
  for (int r = 0; r <= rounds; ++r) {
    for (size_t i = 0; i < sides.size(); ++i) {  // the first side alternates
      Side& s = sides[(i + static_cast<size_t>(r)) % sides.size()];
      const double m = median(hand_loop([&] { s.step(feeds, loss); }, runs));
      if (r > 0) s.medians.push_back(m);  // round 0 warms up
    }
    if (r > 0) ratio.push_back(sides[0].medians.back() / sides[1].medians.back());
  }
  const ReplayReport& report = dynamic_cast<ReplayingExecutor&>(*sides[1].ex).report();
  std::cout << fmt::format("== {} batch {} {} ({} rounds of {} runs)\n", model, batch, train ? "training step" : "inference",
                           rounds, runs);
  for (auto& s : sides) {
    std::vector<double> ms;
    for (double v : s.medians) ms.push_back(v * 1e3);
    std::cout << fmt::format("  {:<7} {} ms\n", s.name, with_ci(ms, "{:.3f}"));
  }
  std::cout << fmt::format("  graphs: {} recording(s), {} replays, {} calls without the graph{}\n", report.recordings,
                           report.replays, report.unrecorded_calls,
                           report.replays == 0 ? " (" + report.last_unrecorded_why + ")" : "");
  std::cout << fmt::format("  outputs of a replay against the plain step: largest difference {:.3g}\n", gap);
  std::cout << fmt::format("  plain / graphs: {}  (> 1: graphs are faster)\n", with_ci(ratio));
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv,
                  {{"batch", "16"}, {"rounds", "20"}, {"runs", "10"}, {"models", "lenet5,resnet20"}, {"mode", "train-step"}});
  register_builtin_operators();
  const auto known = executor_backends();
  if (std::find(known.begin(), known.end(), "cuda") == known.end()) {
    std::cout << "no cuda executor here (built without the CUDA backend, or no usable GPU)\n";
    return 0;
  }
  const std::string mode = args.str("mode");
  D5_CHECK_ARG(mode == "train-step" || mode == "inference", "--mode is train-step or inference, got '{}'", mode);
  const int rounds = args.integer("rounds"), runs = args.integer("runs");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  for (const auto& model : args.list("models")) compare(model, args.integer("batch"), mode == "train-step", rounds, runs);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_cuda_graphs: " << e.what() << "\n";
  return 1;
}
