// How far the reference backend is from an optimized library, and how close that library gets to
// this machine's measured peak:
//  1. reference Conv vs oneDNN Conv on DeepBench convolution training problems: per round one
//     reference run against the median of several oneDNN runs, interleaved; the ratio of times
//     with its 95% CI. Target: the reference within 20x.
//  2. a large DeepBench training GEMM on oneDNN as a fraction of the measured peak FMA rate.
//     Target: >= 60%.
// oneDNN is the onednn backend's operator when the registry has one, else our own primitive.
#include <algorithm>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/metrics/manifest.h"
#include "deep500/op/op_registry.h"
#include "deep500/metrics/peak.h"
#include "deep500/op/native_calls.h"

namespace {

using namespace d5;
using namespace d5::bench;

// A forward call on oneDNN: the backend's operator, or the native primitive when the backend
// refuses or lacks the op.
struct OnednnSide {
  std::function<void()> run;
  std::string implementation;
};

std::optional<OnednnSide> onednn_side(const Problem& p, const std::vector<Tensor>& inputs,
                                      std::unique_ptr<Operator>& op, std::vector<Tensor>& outputs) {
  std::string why;
  if (find_backend("onednn")) {
    try {
      op = OpRegistry::global().create(p.spec, "onednn");
      for (const auto& d : op->output_descs()) outputs.push_back(Tensor::uninitialized(d));
      Operator* o = op.get();
      return OnednnSide{[o, &inputs, &outputs] { o->forward(inputs, outputs); }, "d5 onednn backend: " + o->implementation()};
    } catch (const Unimplemented& e) {
      why = e.what();
    }
  }
  // oneDNN at its best: blocked formats of its choosing, inputs reordered once up front.
  auto native = make_native_call("onednn", p, inputs, &why, NativeLayout::Best);
  if (!native) {
    std::cout << fmt::format("{}: no oneDNN side: {}\n", p.name, why);
    return std::nullopt;
  }
  return OnednnSide{native->run, "native primitive " + native->implementation};
}

void reference_vs_onednn(const Args& args, Results& res) {
  std::cout << "== reference Conv vs oneDNN Conv, DeepBench conv training (target: reference within 20x)\n";
  int done = 0;
  std::vector<double> case_ratios;
  for (const auto& p : load_suite("deepbench-conv-training", 0x5eed)) {
    if (done >= args.integer("limit")) break;
    std::unique_ptr<Operator> ref;
    try {
      ref = OpRegistry::global().create(p.spec, "reference");
    } catch (const Unimplemented& e) {
      std::cout << "reference refuses: " << e.what() << "\n";
      return;
    }
    if (ref->flops() * 1e-9 > args.number("max-gflop")) continue;
    const auto inputs = generate_inputs(p);
    std::vector<Tensor> ref_out = ref->run_forward(inputs), fast_out;
    std::unique_ptr<Operator> fast_op;
    auto fast = onednn_side(p, inputs, fast_op, fast_out);
    if (!fast) return;
    ++done;
    const double fast_probe = median(hand_loop(fast->run, 3));
    const int fast_runs = static_cast<int>(std::clamp(0.05 / fast_probe, 3.0, 200.0));
    std::vector<double> ratios, ref_t, fast_t;
    for (int r = 0; r <= args.integer("rounds"); ++r) {
      const double tr = harness_runs([&] { ref->forward(inputs, ref_out); }, 1)[0];
      const double tf = median(harness_runs(fast->run, fast_runs));
      if (r == 0) continue;
      ratios.push_back(tr / tf);
      ref_t.push_back(tr);
      fast_t.push_back(tf);
    }
    case_ratios.push_back(median(ratios));
    std::cout << fmt::format("{:<44} {:>6.2f} GFLOP  reference {:>9.2f} ms  oneDNN {:>8.3f} ms  ratio {}\n", p.name,
                             ref->flops() * 1e-9, median(ref_t) * 1e3, median(fast_t) * 1e3, with_ci(ratios, "{:.1f}"));
    std::cout << fmt::format("        reference: {:.2f} GFLOP/s; oneDNN: {} ({:.1f} GFLOP/s)\n",
                             ref->flops() * 1e-9 / median(ref_t), fast->implementation,
                             ref->flops() * 1e-9 / median(fast_t));
    res.cases.push_back(ratio_case("reference/onednn " + p.name, "reference", p.params, ratios,
                                   {{"target", "<= 20"}, {"onednn", fast->implementation},
                                    {"reference_median_s", median(ref_t)}, {"onednn_median_s", median(fast_t)}}));
  }
  if (!case_ratios.empty())
    std::cout << fmt::format("median over {} cases: reference is {:.1f}x slower than oneDNN (target <= 20x: {})\n",
                             case_ratios.size(), median(case_ratios), median(case_ratios) <= 20 ? "met" : "missed");
}

void large_gemm(const Args& args, Results& res) {
  // The "largest" training GEMM: the biggest smallest dimension (a GEMM with a dimension of 16 is
  // bandwidth-bound and says nothing about the FMA units), within a per-run flop budget.
  std::optional<Problem> best;
  auto key = [](const Problem& p) {
    const int64_t m = p.params["m"], n = p.params["n"], k = p.params["k"];
    return std::pair{std::min({m, n, k}), static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)};
  };
  for (const auto& p : load_suite("deepbench-gemm-training", 0x5eed)) {
    if (2 * key(p).second * 1e-9 > args.number("gemm-max-gflop")) continue;
    if (!best || key(p) > key(*best)) best = p;
  }
  if (!best) return;
  const MachinePeak& machine = machine_peak();
  const double peak = peak_gflops(machine);
  std::cout << fmt::format("== large GEMM on oneDNN vs the measured peak ({:.1f} GFLOP/s f32, {} x{}; target >= 60%)\n",
                           peak, to_string(machine.isa), machine.fma_all_threads.threads);
  const auto inputs = generate_inputs(*best);
  std::unique_ptr<Operator> op;
  std::vector<Tensor> outputs;
  auto fast = onednn_side(*best, inputs, op, outputs);
  if (!fast) return;
  const double flops = 2 * key(*best).second;
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  RunSettings s;
  s.min_runs = 6;
  s.max_seconds = args.number("gemm-seconds");
  const RunOutcome outcome = run_measured(fast->run, metrics, s);
  std::vector<double> fraction;
  for (double t : metrics[0].samples()) fraction.push_back(flops / t * 1e-9 / peak);
  std::cout << fmt::format("{:<28} {:.1f} GFLOP  {:.1f} GFLOP/s  fraction of peak {} ({}; {})\n", best->name,
                           flops * 1e-9, flops / median(metrics[0].samples()) * 1e-9, with_ci(fraction, "{:.3f}"),
                           median(fraction) >= 0.6 ? "target met" : "target missed", outcome.reason);
  std::cout << "        " << fast->implementation << "\n";
  res.cases.push_back(ratio_case("onednn large gemm peak fraction " + best->name, "onednn", best->params, fraction,
                                 {{"target", ">= 0.6"}, {"peak_gflops", peak}, {"onednn", fast->implementation}}));
}

}  // namespace

int main(int argc, char** argv) try {
  set_invocation(argc, argv);
  const Args args(argc, argv,
                  {{"limit", "3"}, {"rounds", "6"}, {"max-gflop", "1.5"}, {"gemm-max-gflop", "40"},
                   {"gemm-seconds", "10"}, {"json", ""}});
  D5_CHECK_ARG(args.integer("rounds") >= 6, "--rounds must be >= 6 for a 95% CI of the median");
  register_builtin_operators();
  const auto libs = native_libraries();
  if (std::find(libs.begin(), libs.end(), "onednn") == libs.end()) {
    std::cout << "oneDNN is not built into this program; nothing to compare\n";
    return 0;
  }
  Results res;
  large_gemm(args, res);  // first: the peak is measured before anything heats the machine
  reference_vs_onednn(args, res);
  if (!args.str("json").empty()) {
    res.manifest = make_manifest({});
    res.manifest["extra"] = {{"peak", to_json(machine_peak())}};
    write_results(args.str("json"), res);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_reference_vs_onednn: " << e.what() << "\n";
  return 2;
}
