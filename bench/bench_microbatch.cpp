// Micro-batching under a workspace limit (docs/microbatching.md), the effect of the Deep500
// paper's section V-C on this machine's reference backend: a stack of deep-layer convolutions at
// a batch whose fast (batched im2col) algorithm needs more workspace than the limit. Three
// networks run on the ReferenceExecutor, interleaved round by round in one process:
//   unlimited     no limit: the batched algorithm on the whole batch (most workspace)
//   limited       the limit, whole batch: the registry falls back to the per-image algorithm
//   micro-batched the limit, with the convolutions split as plan_microbatches chose
// Reported: the plan, each network's median inference time, peak workspace, and the ratios
// limited / micro-batched (the gain of the transformation) and micro-batched / unlimited (what
// the limit still costs), with 95% CIs over rounds.
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/microbatch.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"

namespace {

using namespace d5;
using namespace d5::bench;

// Three 3x3 convolutions of the shapes of ResNet's last stages, with ReLUs.
Network conv_stack(int64_t batch) {
  Network net("conv-stack");
  net.add_input("x", TensorDesc{DType::f32, Shape{batch, 256, 14, 14}});
  struct Layer {
    int64_t in, out, stride;
  };
  const Layer layers[] = {{256, 256, 1}, {256, 512, 2}, {512, 512, 1}};
  std::string x = "x";
  int k = 0;
  for (const auto& l : layers) {
    const std::string w = fmt::format("w{}", k), c = fmt::format("conv{}", k), y = fmt::format("relu{}", k);
    Tensor wt(DType::f32, Shape{l.out, l.in, 3, 3});
    wt.fill(0.01);
    net.feed_tensor(w, wt, true);
    Attributes a{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{l.stride, l.stride}}};
    net.add_node({c, "Conv", "", a, {x, w}, {c + "_out"}});
    net.add_node({y, "Relu", "", {}, {c + "_out"}, {y + "_out"}});
    x = y + "_out";
    ++k;
  }
  net.add_output(x);
  return net;
}

int64_t peak_workspace(GraphExecutor& ex) {
  int64_t peak = 0;
  auto* op_ex = dynamic_cast<OperatorExecutor*>(&ex);
  if (!op_ex) return -1;
  for (const auto& n : ex.network().nodes())
    if (const Operator* op = op_ex->operator_of(n.name)) peak = std::max(peak, op->workspace_bytes());
  return peak;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv, {{"batch", "32"}, {"limit-mb", "24"}, {"rounds", "10"}, {"runs", "3"}});
  register_builtin_operators();
  const int64_t batch = args.integer("batch");
  const int64_t limit = static_cast<int64_t>(args.number("limit-mb") * (1 << 20));
  const int rounds = args.integer("rounds"), runs = args.integer("runs");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);

  Network unlimited = conv_stack(batch), limited = conv_stack(batch), micro = conv_stack(batch);
  MicrobatchOptions mo;
  mo.workspace_limit = limit;
  const MicrobatchPlan plan = plan_microbatches(micro, mo);
  const int split = apply_microbatches(micro, plan);
  std::cout << fmt::format("batch {}, workspace limit {} MiB: {} of {} convolutions split\n", batch,
                           args.number("limit-mb"), split, plan.convs.size());
  for (const auto& c : plan.convs) {
    std::cout << fmt::format("  {:<6} -> [{}]   whole batch {:.2f} ms ({} MiB)   plan {:.2f} ms ({} MiB)\n", c.node,
                             fmt::join(c.micro_batches, ","), c.time_before_s * 1e3,
                             c.workspace_before >> 20, c.time_after_s * 1e3, c.workspace_after >> 20);
    for (const auto& t : c.candidates)
      std::cout << fmt::format("         b={:<4} {:8.2f} ms [{:.2f}, {:.2f}]  {:>5} MiB  {}\n", t.batch,
                               t.median_s * 1e3, t.ci_low_s * 1e3, t.ci_high_s * 1e3, t.workspace_bytes >> 20,
                               t.implementation);
  }

  OperatorExecutorOptions with_limit;
  with_limit.workspace_limit = limit;
  ReferenceExecutor ex_unlimited(unlimited), ex_limited(limited, with_limit), ex_micro(micro, with_limit);
  Tensor x(DType::f32, Shape{batch, 256, 14, 14});
  x.fill(0.5);
  const TensorMap feeds{{"x", x}};
  struct Side {
    const char* name;
    GraphExecutor* ex;
    std::vector<double> medians;
  };
  std::vector<Side> sides = {{"unlimited", &ex_unlimited, {}}, {"limited", &ex_limited, {}},
                             {"micro-batched", &ex_micro, {}}};
  std::vector<double> gain, cost;
  for (int r = 0; r <= rounds; ++r) {
    // Rotate which side goes first, so drift and frequency changes hit all alike.
    for (size_t i = 0; i < sides.size(); ++i) {
      Side& s = sides[(i + static_cast<size_t>(r)) % sides.size()];
      const double m = median(hand_loop([&] { s.ex->inference(feeds); }, runs));
      if (r > 0) s.medians.push_back(m);  // round 0 warms up
    }
    if (r > 0) {
      gain.push_back(sides[1].medians.back() / sides[2].medians.back());
      cost.push_back(sides[2].medians.back() / sides[0].medians.back());
    }
  }
  for (auto& s : sides) {
    std::vector<double> ms;
    for (double v : s.medians) ms.push_back(v * 1e3);
    std::cout << fmt::format("{:<14} {} ms   peak workspace {} MiB\n", s.name, with_ci(ms, "{:.2f}"),
                             peak_workspace(*s.ex) >> 20);
  }
  std::cout << fmt::format("limited / micro-batched: {}  (> 1: micro-batching is faster under the limit)\n",
                           with_ci(gain));
  std::cout << fmt::format("micro-batched / unlimited: {}  (what the limit still costs)\n", with_ci(cost));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_microbatch: " << e.what() << "\n";
  return 1;
}
