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
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/metrics/manifest.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/op_overhead.h"

namespace {

using namespace d5;
using namespace d5::bench;

// The targets: deep500's cost within 0.5% of a host library call, within 1% of a GPU
// library call timed by the device's clock.
const char* target_for(Device d) { return d.kind == DeviceKind::cpu ? "<= 1.005" : "<= 1.01"; }

enum class Outcome { measured, skipped, stop_suite };

// The per-case median ratios of one group of cases and the target they are held to.
struct Group {
  std::string target;
  std::vector<double> medians;
};

// One problem of `suite` on `backend`'s operator: measures (deep500/op/op_overhead.h), prints and
// records the case. Host cases share the group "", a device backend's cases its name.
Outcome bench_problem(const std::string& backend, const char* suite, const Problem& p, Operator& op,
                      const OverheadSettings& set, Results& res, std::map<std::string, Group>& groups) {
  const OverheadMeasurement m = measure_op_overhead(backend, p, op, set);
  using O = OverheadMeasurement::Outcome;
  if (m.outcome != O::Measured) {
    std::cout << fmt::format("{} {}: {}{}\n", backend, p.name, m.outcome == O::NoNative ? "no native side: " : "",
                             m.why);
    return m.outcome == O::NoNative ? Outcome::stop_suite : Outcome::skipped;
  }
  const Device dev = op.device();
  const bool on_device = dev.kind != DeviceKind::cpu;
  Group& group = groups[on_device ? backend : ""];
  group.target = target_for(dev);
  group.medians.push_back(median(m.ratios));
  std::cout << fmt::format("{:<7} {:<44} d5 {:>10.1f} us  native {:>10.1f} us  ratio {}\n", backend, p.name,
                           median(m.d5_seconds) * 1e6, median(m.native_seconds) * 1e6, with_ci(m.ratios));
  std::cout << fmt::format("        d5: {}; native: {}\n", m.d5_implementation, m.native_implementation);
  nlohmann::json extra = {{"suite", suite},
                          {"d5_implementation", m.d5_implementation},
                          {"native_implementation", m.native_implementation},
                          {"d5_median_s", median(m.d5_seconds)},
                          {"native_median_s", median(m.native_seconds)},
                          {"target", target_for(dev)}};
  if (on_device) {
    extra["device"] = dev.to_string();
    extra["timing"] = m.timing;
  }
  res.cases.push_back(ratio_case(p.name, backend, p.params, m.ratios, std::move(extra)));
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

  const OverheadSettings set{.rounds = rounds, .round_seconds = args.number("round-seconds"), .min_us = args.number("min-us")};

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
