// Operator harness overhead: for DeepBench GEMM and convolution training problems, a native
// backend's operator timed through deep500 (the registry's Operator::forward under run_measured)
// against the same library called directly (our own oneDNN primitive, or ATen on from_blob
// tensors) in a hand-written steady_clock loop. Rounds alternate which side goes first, in one
// process, so noise and frequency changes hit both alike. Per case: the median per-round ratio
// with its 95% CI; overall: the median over cases. Target: <= 1.005.
#include <algorithm>
#include <climits>
#include <iostream>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/metrics/manifest.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/op_registry.h"
#include "native_ops.h"

namespace {

using namespace d5;
using namespace d5::bench;

// ATen returns each result in a fresh allocation, on both sides. With glibc's defaults, whether a
// buffer of tens of MB lands on pages already mapped or on new ones (page faults cost about two
// thirds of a DeepBench mb4 convolution) follows malloc's dynamic mmap and trim thresholds, that
// is the allocation history the two sides share: times alternate between two modes from call to
// call and swamp a 0.5% comparison. Keeping freed memory in the heap puts both sides in one
// steady regime (and makes the native side faster, not slower). Returns whether it took effect.
bool keep_freed_memory() {
#ifdef __GLIBC__
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

// Runs one case; returns its per-round ratios (empty when it was skipped, with the reason
// printed).
std::vector<double> measure_case(Operator& op, NativeCall& native, const std::vector<Tensor>& inputs, int rounds,
                                 double round_seconds, double* d5_median, double* native_median) {
  // Owned outputs, as an executor allocates them: the torch backend rebinds them to ATen's fresh
  // results, so each call frees the previous result when the next is ready, as `last = conv2d(..)`
  // does on the native side.
  std::vector<Tensor> outputs;
  for (const auto& d : op.output_descs()) outputs.push_back(Tensor::uninitialized(d));
  auto d5_call = [&] { op.forward(inputs, outputs); };
  const double probe = median(hand_loop(d5_call, 3));
  const int runs = static_cast<int>(std::clamp(round_seconds / probe, 5.0, 500.0));
  std::vector<double> ratios, d5_meds, native_meds;
  for (int r = 0; r <= rounds; ++r) {
    std::vector<double> h, n;
    if (r % 2 == 0) {
      h = harness_runs(d5_call, runs);
      n = hand_loop(native.run, runs);
    } else {
      n = hand_loop(native.run, runs);
      h = harness_runs(d5_call, runs);
    }
    if (r == 0) continue;  // warms caches, allocators and clocks for both sides
    ratios.push_back(median(h) / median(n));
    d5_meds.push_back(median(h));
    native_meds.push_back(median(n));
  }
  *d5_median = median(d5_meds);
  *native_median = median(native_meds);
  return ratios;
}

}  // namespace

int main(int argc, char** argv) try {
  set_invocation(argc, argv);
  const Args args(argc, argv,
                  {{"backend", "onednn,torch"}, {"limit", "3"}, {"rounds", "10"}, {"round-seconds", "0.1"},
                   {"min-us", "50"}, {"max-memory", "1000000000"}, {"malloc", "reuse"}, {"json", ""}});
  D5_CHECK_ARG(args.str("malloc") == "reuse" || args.str("malloc") == "default",
               "--malloc must be 'reuse' or 'default', got '{}'", args.str("malloc"));
  const std::string malloc_mode = args.str("malloc") == "reuse" && keep_freed_memory() ? "reuse" : "default";
  std::cout << fmt::format("malloc: {}\n", malloc_mode == "reuse"
                                                ? "freed memory stays in the heap (no mmap, no trim)"
                                                : "the C library's defaults");
  register_builtin_operators();
  const int limit = args.integer("limit"), rounds = args.integer("rounds");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);

  Results res;
  std::vector<double> case_medians;
  for (const auto& backend : args.list("backend")) {
    if (!find_backend(backend)) {
      std::cout << fmt::format("{}: not built into this binary; skipped\n", backend);
      continue;
    }
    for (const char* suite : {"deepbench-gemm-training", "deepbench-conv-training"}) {
      int done = 0;
      for (const auto& p : load_suite(suite, 0x5eed)) {
        if (done >= limit) break;
        if (p.tensor_bytes > static_cast<int64_t>(args.number("max-memory"))) continue;
        std::unique_ptr<Operator> op;
        try {
          op = OpRegistry::global().create(p.spec, backend);
        } catch (const Unimplemented& e) {
          // Refusals are per problem, but a backend without the op type refuses them all.
          std::cout << fmt::format("{} {} {}: refused: {}\n", backend, suite, p.name, e.what());
          if (OpRegistry::global().implementations(p.spec.type, backend).empty()) break;
          continue;
        }
        const auto inputs = generate_inputs(p);
        std::string why;
        // The onednn backend lets oneDNN choose formats and reorders at the boundary on every
        // call; the native side does the same, so the ratio is deep500's cost, not a choice.
        auto native = make_native_call(backend, p, inputs, &why, NativeLayout::Boundary);
        if (!native) {
          std::cout << fmt::format("{} {}: no native side: {}\n", backend, p.name, why);
          break;
        }
        // Both must compute the same thing, or the ratio compares different work.
        std::vector<Tensor> outputs = op->run_forward(inputs);
        native->run();
        const auto cmp = compare_output(native->result(), outputs[0],
                                        check_tolerance(DType::f32, p.spec.type, p.forward_reduction), 0);
        if (cmp.mismatches > 0) {
          std::cout << fmt::format("{} {}: native and deep500 outputs differ (max |diff| {:.3g}); skipped\n",
                                   backend, p.name, cmp.max_abs_error);
          continue;
        }
        const double probe = median(hand_loop(native->run, 3));
        if (probe < args.number("min-us") * 1e-6) {
          std::cout << fmt::format("{} {}: {:.1f} us < {} us; skipped (too short for a stable ratio)\n", backend,
                                   p.name, probe * 1e6, args.str("min-us"));
          continue;
        }
        double d5_med = 0, native_med = 0;
        const auto ratios = measure_case(*op, *native, inputs, rounds, args.number("round-seconds"), &d5_med,
                                         &native_med);
        ++done;
        case_medians.push_back(median(ratios));
        std::cout << fmt::format("{:<7} {:<44} d5 {:>10.1f} us  native {:>10.1f} us  ratio {}\n", backend, p.name,
                                 d5_med * 1e6, native_med * 1e6, with_ci(ratios));
        std::cout << fmt::format("        d5: {}; native: {}\n", op->implementation(), native->implementation);
        res.cases.push_back(ratio_case(p.name, backend, p.params, ratios,
                                       {{"suite", suite},
                                        {"d5_implementation", op->implementation()},
                                        {"native_implementation", native->implementation},
                                        {"d5_median_s", d5_med},
                                        {"native_median_s", native_med}}));
      }
    }
  }
  if (case_medians.empty()) {
    std::cout << "no case could be measured: no native backend offers GEMM or Conv operators in this build\n";
  } else {
    std::cout << fmt::format("overall: median over {} cases of the per-case median ratio (d5 / native): {}  "
                             "(target <= 1.005)\n",
                             case_medians.size(), with_ci(case_medians));
    res.cases.push_back(ratio_case("overall", "", {{"cases", case_medians.size()}}, case_medians,
                                   {{"target", "<= 1.005"},
                                    {"of", "per-case median ratios"},
                                    {"malloc", malloc_mode}}));
  }
  if (!args.str("json").empty()) {
    res.manifest = make_manifest({});
    write_results(args.str("json"), res);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_op_overhead: " << e.what() << "\n";
  return 2;
}
