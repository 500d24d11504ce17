// d5 ops bench: every problem of a suite on every requested backend, through the adaptive runner:
// median time with its CI, GFLOP/s, GB/s and the fraction of this machine's measured FMA peak;
// in check/grad modes also correctness against the reference backend.

#include <iostream>
#include <regex>

#include <fmt/format.h>

#include "cli_common.h"
#include "progress.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/device.h"
#include "deep500/core/error.h"
#include "deep500/metrics/manifest.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/op_registry.h"
#include "deep500/metrics/peak.h"
#include "deep500/metrics/reporter.h"

namespace d5::cli {

namespace {
using nlohmann::json;

struct BenchOpts {
  OutputOptions out;
  std::string suite, mode = "perf", filter, dtype = "f32";
  std::vector<std::string> backends;
  bool list = false;
  int64_t limit = 0;
  double min_time = 0.2, max_time = 5;
  bool no_flush = false;
  int64_t max_memory = -1;  // -1: a quarter of physical memory
};

std::string suite_names() {
  std::vector<std::string> names;
  for (const auto& s : available_suites()) names.push_back(s.name);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

int list_suites(const OutputOptions& out) {
  json j = json::array();
  std::string text = fmt::format("suites in {}\n", suites_directory());
  for (const auto& s : available_suites()) {
    const auto rows = load_suite_file(s.path, s.name, 0).size();
    j.push_back({{"name", s.name}, {"path", s.path}, {"rows", rows}});
    text += fmt::format("  {:<36} {:>4} rows\n", s.name, rows);
  }
  emit_text(text, j, out);
  return kExitOk;
}

int run_bench(const BenchOpts& o, const GlobalOptions& g) {
  register_builtin_operators();
  if (o.list) return list_suites(o.out);
  D5_CHECK_ARG(!o.suite.empty(), "--suite is required; available: {}", suite_names());
  ExperimentSettings settings = settings_from(g);
  const auto all = load_suite(o.suite, settings.seed);
  std::vector<Problem> problems = select_problems(all, o.suite, o.filter, o.limit);
  const DType dtype = parse_dtype(o.dtype);
  for (auto& p : problems) p = in_dtype(std::move(p), dtype);

  const std::vector<std::string> names = chosen_backends(o.backends);

  OpBenchOptions bo;
  bo.mode = parse_bench_mode(o.mode);
  bo.min_time = o.min_time;
  bo.flush_device_caches = !o.no_flush;
  bo.max_time = o.max_time;
  bo.max_memory = o.max_memory >= 0 ? o.max_memory : cpu_info().memory_bytes / 4;
  // Measured before any case, so no case's leftovers (caches, clocks) are in it. Only the FMA
  // figure the fractions divide by: the triad's seconds would buy nothing here (`d5 peak` has it).
  const PeakMeasurement& peak = machine_fma_peak();
  bo.peak_gflops = peak_gflops(peak);

  Results res;
  // One line per finished case, on a terminal only, not under --format json or in CI (as Progress).
  const bool progress = Progress(o.out.format != "json").enabled();
  size_t done = 0;
  for (const auto& p : problems) {
    settings.stream(p.stream);
    ProblemContext ctx(p);
    ++done;
    for (const auto& b : names) {
      res.cases.push_back(bench_problem(ctx, b, bo));
      const auto& c = res.cases.back();
      if (progress)
        std::cerr << fmt::format("d5: [{}/{}] {} on {}: {}{}\n", done, problems.size(), c.name, b, to_string(c.state),
                                 c.metrics.empty() || !c.metrics[0].summary
                                     ? ""
                                     : " " + format_seconds(c.metrics[0].summary->median));
    }
  }

  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {
      {"peak", fma_peak_json(peak)},
      {"suite", {{"name", o.suite}, {"directory", suites_directory()}, {"rows", all.size()},
                 {"selected", problems.size()}, {"filter", o.filter}, {"limit", o.limit}}},
      {"mode", o.mode},
      {"dtype", o.dtype},
      {"backends", names},
      {"min_time_s", o.min_time},
      {"flush_device_caches", !o.no_flush},
      {"max_time_s", o.max_time},
      {"max_memory_bytes", bo.max_memory}};
  emit(res, o.out);
  return exit_code_for(res);
}

}  // namespace

std::vector<Problem> select_problems(const std::vector<Problem>& all, const std::string& suite,
                                     const std::string& filter, int64_t limit) {
  std::vector<Problem> problems = all;
  if (!filter.empty()) {
    std::regex re;
    try {
      re = std::regex(filter);
    } catch (const std::regex_error& e) {
      D5_THROW(InvalidArgument, "--filter '{}' is not a valid regular expression: {}", filter, e.what());
    }
    std::erase_if(problems, [&](const Problem& p) { return !std::regex_search(p.name, re); });
  }
  if (limit > 0 && static_cast<int64_t>(problems.size()) > limit) problems.resize(static_cast<size_t>(limit));
  // An empty selection would "pass" every check with nothing checked.
  D5_CHECK_ARG(!problems.empty() || all.empty(), "no problem of suite {} matches --filter '{}' (its names look like '{}')",
               suite, filter, all.front().name);
  return problems;
}

std::vector<std::string> chosen_backends(const std::vector<std::string>& requested) {
  std::vector<std::string> names = requested;
  if (names.empty())
    for (const auto& b : backends()) names.push_back(b.name);
  // A typo is a usage error before any case runs; a backend this build left out is SKIPPED per case.
  std::vector<std::string> built;
  for (const auto& b : backends()) built.push_back(b.name);
  for (const auto& b : names)
    D5_CHECK_ARG(find_backend(b) || is_not_built_backend(b), "--backend: no backend '{}' (built: {}; left out of "
                 "this build: {})", b, fmt::join(built, ", "), not_built_list());
  return names;
}

void register_ops_bench(CLI::App& ops, const GlobalOptions& g, std::vector<Command>& subcommands) {
  auto* bench = ops.add_subcommand("bench", "Benchmark a problem suite: time, GFLOP/s, fraction of peak, correctness");
  auto o = std::make_shared<BenchOpts>();
  bench->add_option("--suite", o->suite, "Suite to run, e.g. deepbench-gemm-training (see --list-suites)");
  bench->add_flag("--list-suites", o->list, "List the available suites and their sizes");
  bench->add_option("--backend", o->backends, "Backends, comma-separated (default: every backend built in)")
      ->delimiter(',');
  bench->add_option("--mode", o->mode, "perf: time forward; check: compare forward with the reference, then time; "
                                       "grad: compare forward and backward, time backward")
      ->check(CLI::IsMember({"perf", "check", "grad"}))
      ->default_val("perf");
  bench->add_option("--dtype", o->dtype,
                    "Precision of the problems' inputs and outputs: f32 (DeepBench's), or f16 / bf16 (tensor cores "
                    "on GPUs; checked against the reference's f32 result rounded once)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->default_val("f32");
  bench->add_option("--limit", o->limit, "Only the first N problems (after --filter); 0 = all")
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--filter", o->filter, "Only problems whose name matches this regular expression (ECMAScript)");
  bench->add_flag("--no-flush", o->no_flush,
                  "Keep a GPU's L2 cache warm between timed runs (by default it is flushed before each run)");
  bench->add_option("--min-time", o->min_time, "Seconds of measured runs per case at least (never fewer than 6 runs)")
      ->check(CLI::PositiveNumber)
      ->default_val(0.2);
  bench->add_option("--max-time", o->max_time,
                    "Seconds per case after which an unmet CI target stops the runs (the case is then INVALID)")
      ->check(CLI::PositiveNumber)
      ->default_val(5.0);
  bench->add_option("--max-memory", o->max_memory,
                    "Skip cases whose tensors need more than this (bytes; k/M/G = 1000s, ki/Mi/Gi = 1024s; "
                    "default: a quarter of physical memory)")
      ->transform(CLI::AsSizeValue(true));
  add_output_options(*bench, o->out);
  subcommands.push_back({bench, [o, &g] { return run_bench(*o, g); }});
}

}  // namespace d5::cli
