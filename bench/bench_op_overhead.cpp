// Operator harness overhead: for DeepBench GEMM and convolution training problems, a native
// backend's operator timed through deep500 (the registry's Operator::forward under run_measured)
// against the same library called directly. On the host (onednn, torch): our own oneDNN
// primitive, or ATen on from_blob tensors, in a hand-written steady_clock loop; target <= 1.005.
// On the GPU (cuda): cuBLAS / cuDNN with handles and buffers of our own and the operator's cuDNN
// algorithm, both sides timed by the device's clock (CUDA events) around the call alone, caches
// flushed before each call; target <= 1.01. Rounds alternate which side goes first, in one
// process, so noise and frequency changes hit both alike. Per case: the median per-round ratio
// with its 95% CI; overall: the median over cases, for the host backends together and for each
// device backend.
#include <algorithm>
#include <climits>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

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

// The two sides of a case: each runs a given number of timed calls and returns their seconds.
struct Sides {
  std::function<std::vector<double>(int)> d5, native;
};

// Rounds of `runs` calls per side; returns the per-round ratios of medians.
std::vector<double> interleave(const Sides& sides, int runs, int rounds, double* d5_median, double* native_median) {
  std::vector<double> ratios, d5_meds, native_meds;
  for (int r = 0; r <= rounds; ++r) {
    std::vector<double> h, n;
    if (r % 2 == 0) {
      h = sides.d5(runs);
      n = sides.native(runs);
    } else {
      n = sides.native(runs);
      h = sides.d5(runs);
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

int runs_per_round(double round_seconds, double probe) {
  return static_cast<int>(std::clamp(round_seconds / probe, 5.0, 500.0));
}

// Runs one case on the host; returns its per-round ratios.
std::vector<double> measure_case(Operator& op, NativeCall& native, const std::vector<Tensor>& inputs, int rounds,
                                 double round_seconds, double* d5_median, double* native_median) {
  // Owned outputs, as an executor allocates them: the torch backend rebinds them to ATen's fresh
  // results, so each call frees the previous result when the next is ready, as `last = conv2d(..)`
  // does on the native side.
  std::vector<Tensor> outputs;
  for (const auto& d : op.output_descs()) outputs.push_back(Tensor::uninitialized(d));
  auto d5_call = [&] { op.forward(inputs, outputs); };
  const int runs = runs_per_round(round_seconds, median(hand_loop(d5_call, 3)));
  return interleave({[&](int n) { return harness_runs(d5_call, n); }, [&](int n) { return hand_loop(native.run, n); }},
                    runs, rounds, d5_median, native_median);
}

// Runs one case on the operator's device (inputs already there); returns its per-round ratios.
// Both sides are timed alike, by the device's clock around the call alone with its caches
// flushed before (DeviceRun): deep500's through its runner, the DeviceTime metric first as
// the operator benchmark has it, the native one in a hand loop.
std::vector<double> measure_device_case(Operator& op, NativeCall& native, const std::vector<Tensor>& inputs,
                                        int rounds, double round_seconds, double* d5_median, double* native_median) {
  const Device dev = op.device();
  std::vector<Tensor> outputs;
  for (const auto& d : op.output_descs()) outputs.push_back(Tensor::uninitialized(d, dev));
  const auto d5_timed = device_clock(dev), native_timed = device_clock(dev);
  auto d5_call = [&] { op.forward(inputs, outputs); };
  const int runs = runs_per_round(round_seconds, median(hand_device_loop(d5_call, 3, *d5_timed)));
  return interleave({[&](int n) { return harness_device_runs(d5_call, n, *d5_timed); },
                     [&](int n) { return hand_device_loop(native.run, n, *native_timed); }},
                    runs, rounds, d5_median, native_median);
}

// The targets: deep500's cost within 0.5% of a host library call, within 1% of a GPU
// library call timed by the device's clock.
const char* target_for(Device d) { return d.kind == DeviceKind::cpu ? "<= 1.005" : "<= 1.01"; }

struct Settings {
  int rounds = 10;
  double round_seconds = 0.1, min_us = 50;
};

enum class Outcome { measured, skipped, stop_suite };

// The per-case median ratios of one group of cases and the target they are held to.
struct Group {
  std::string target;
  std::vector<double> medians;
};

// One problem of `suite` on `backend`'s operator: checks both sides agree, measures, prints and
// records the case. Host cases share the group "", a device backend's cases its name.
Outcome bench_problem(const std::string& backend, const char* suite, const Problem& p, Operator& op, const Settings& set,
                      Results& res, std::map<std::string, Group>& groups) {
  const Device dev = op.device();
  const bool on_device = dev.kind != DeviceKind::cpu;
  const auto host_inputs = generate_inputs(p);
  // A device operator is handed inputs already on its device, as an executor places them; the
  // native side copies the host inputs to buffers of its own, also before anything is timed.
  const std::vector<Tensor> inputs = on_device ? to_device(host_inputs, dev) : host_inputs;
  std::string why;
  // The onednn backend lets oneDNN choose formats and reorders at the boundary on every call; the
  // native side does the same, so the ratio is deep500's cost, not a choice. On cuDNN the native
  // side runs the forward algorithm the operator chose.
  auto native = make_native_call(
      backend, p, host_inputs, &why,
      NativeMatch{.layout = NativeLayout::Boundary, .d5_implementation = op.implementation(), .device_index = dev.index});
  if (!native) {
    std::cout << fmt::format("{} {}: no native side: {}\n", backend, p.name, why);
    return Outcome::stop_suite;
  }
  // Both must compute the same thing, or the ratio compares different work.
  std::vector<Tensor> outputs = op.run_forward(inputs);
  native->run();
  const auto cmp = compare_output(native->result(), to_device(outputs, Device::cpu())[0],
                                  check_tolerance(DType::f32, p.spec.type, p.forward_reduction), 0);
  if (cmp.mismatches > 0) {
    std::cout << fmt::format("{} {}: native and deep500 outputs differ (max |diff| {:.3g}); skipped\n", backend,
                             p.name, cmp.max_abs_error);
    return Outcome::skipped;
  }
  const std::unique_ptr<DeviceRun> probe_timer = on_device ? device_clock(dev) : nullptr;
  const double probe =
      median(on_device ? hand_device_loop(native->run, 3, *probe_timer) : hand_loop(native->run, 3));
  if (probe < set.min_us * 1e-6) {
    std::cout << fmt::format("{} {}: {:.1f} us < {} us; skipped (too short for a stable ratio)\n", backend, p.name,
                             probe * 1e6, set.min_us);
    return Outcome::skipped;
  }
  double d5_med = 0, native_med = 0;
  const auto ratios =
      on_device ? measure_device_case(op, *native, inputs, set.rounds, set.round_seconds, &d5_med, &native_med)
                : measure_case(op, *native, inputs, set.rounds, set.round_seconds, &d5_med, &native_med);
  Group& group = groups[on_device ? backend : ""];
  group.target = target_for(dev);
  group.medians.push_back(median(ratios));
  std::cout << fmt::format("{:<7} {:<44} d5 {:>10.1f} us  native {:>10.1f} us  ratio {}\n", backend, p.name,
                           d5_med * 1e6, native_med * 1e6, with_ci(ratios));
  std::cout << fmt::format("        d5: {}; native: {}\n", op.implementation(), native->implementation);
  nlohmann::json extra = {{"suite", suite},
                          {"d5_implementation", op.implementation()},
                          {"native_implementation", native->implementation},
                          {"d5_median_s", d5_med},
                          {"native_median_s", native_med},
                          {"target", target_for(dev)}};
  if (on_device) {
    extra["device"] = dev.to_string();
    extra["timing"] = "device time (" + probe_timer->describe() + "), the device synchronised after each run";
  }
  res.cases.push_back(ratio_case(p.name, backend, p.params, ratios, std::move(extra)));
  return Outcome::measured;
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

  const Settings set{.rounds = rounds, .round_seconds = args.number("round-seconds"), .min_us = args.number("min-us")};

  Results res;
  std::map<std::string, Group> groups;
  for (const auto& backend : args.list("backend")) {
    const auto info = find_backend(backend);
    if (!info) {
      std::cout << fmt::format("{}: not built into this binary; skipped\n", backend);
      continue;
    }
    if (!info->available) {
      std::cout << fmt::format("{}: unavailable: {}; skipped\n", backend, info->unavailable_reason);
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
        const Outcome o = bench_problem(backend, suite, p, *op, set, res, groups);
        if (o == Outcome::stop_suite) break;
        if (o == Outcome::measured) ++done;
      }
    }
  }
  if (groups.empty())
    std::cout << "no case could be measured: no native backend offers GEMM or Conv operators in this build\n";
  for (const auto& [name, group] : groups) {
    std::cout << fmt::format("overall{}: median over {} cases of the per-case median ratio (d5 / native): {}  "
                             "(target {})\n",
                             name.empty() ? "" : " " + name, group.medians.size(), with_ci(group.medians),
                             group.target);
    res.cases.push_back(ratio_case("overall", name, {{"cases", group.medians.size()}}, group.medians,
                                   {{"target", group.target},
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
