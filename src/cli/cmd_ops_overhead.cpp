// d5 ops overhead: each native backend's operator called through deep500 against the same library
// called directly, in alternating rounds, per suite problem (docs/ops-overhead.md): the paper's
// Fig. 6 "d5 vs native" half, as a results file.
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/device.h"
#include "deep500/core/error.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/statistics.h"
#include "deep500/op/native_calls.h"
#include "deep500/op/op_overhead.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/suites.h"

namespace d5::cli {

namespace {

using nlohmann::json;

struct OverheadOpts {
  OutputOptions out;
  std::string suite, filter, malloc = "reuse";
  std::vector<std::string> backends;
  int64_t limit = 3;
  int64_t max_memory = -1;  // -1: a quarter of physical memory
  OverheadSettings settings;
};

double median_of(const std::vector<double>& v) { return percentile(v, 50); }

// The paper's claim, as targets: deep500's cost within 0.5% of a host library call, within 1% of
// a GPU library call timed by the device's clock.
const char* target_for(Device d) { return d.kind == DeviceKind::cpu ? "<= 1.005" : "<= 1.01"; }

CaseResult overhead_case(const Problem& p, const std::string& suite, const std::string& backend, Operator& op,
                         const OverheadSettings& settings) {
  CaseResult c;
  c.name = p.name;
  c.level = "L0";
  c.backend = backend;
  c.params = p.params;
  c.params["suite"] = suite;
  const OverheadMeasurement m = measure_op_overhead(backend, p, op, settings);
  using O = OverheadMeasurement::Outcome;
  c.extra = {{"suite", suite},
             {"d5_implementation", m.d5_implementation},
             {"native_implementation", m.native_implementation},
             {"max_abs_difference", m.max_abs_difference},
             {"target", target_for(op.device())}};
  if (m.outcome != O::Measured) {
    // Outputs that differ are a correctness failure: the two sides do not compute the same thing.
    c.state = m.outcome == O::OutputsDiffer ? CaseState::Failed : CaseState::Skipped;
    c.detail = m.outcome == O::NoNative ? "no native side: " + m.why : m.why;
    return c;
  }
  c.metrics = {metric_record("ratio", "x", m.ratios), metric_record("d5_time", "s", m.d5_seconds),
               metric_record("native_time", "s", m.native_seconds)};
  c.extra["timing"] = m.timing;
  c.extra["d5_median_s"] = median_of(m.d5_seconds);
  c.extra["native_median_s"] = median_of(m.native_seconds);
  c.detail = fmt::format("d5 {} / native {}", m.d5_implementation, m.native_implementation);
  return c;
}

// Per group (the host backends together, each device backend alone): the median over its cases of
// their median ratios with its CI, for the manifest (not a case: criteria read the problems').
json overall(const Results& res) {
  std::map<std::string, std::vector<double>> groups;
  std::map<std::string, std::string> targets;
  for (const auto& c : res.cases) {
    if (c.state != CaseState::Passed || c.metrics.empty()) continue;
    const std::string target = c.extra.value("target", std::string());
    const std::string group = target == "<= 1.005" ? "host" : c.backend;
    groups[group].push_back(c.metrics[0].summary->median);
    targets[group] = target;
  }
  json out = json::object();
  for (const auto& [group, medians] : groups) {
    const Summary s = summarize(medians);
    out[group] = {{"cases", medians.size()}, {"median_ratio", s.median}, {"target", targets[group]},
                  {"ci_95", s.median_ci.available ? json::array({s.median_ci.lower, s.median_ci.upper}) : json(nullptr)},
                  {"of", "per-case median ratios"}};
  }
  return out;
}

std::string console_text(const Results& res) {
  std::string text;
  for (const auto& c : res.cases) {
    if (c.metrics.empty()) {
      text += fmt::format("{:<8} {:<44} {}: {}\n", c.backend, c.name, to_string(c.state), c.detail);
      continue;
    }
    const Summary& s = *c.metrics[0].summary;
    const std::string ci = s.median_ci.available
                               ? fmt::format("[{:.4f}, {:.4f}]", s.median_ci.lower, s.median_ci.upper)
                               : "[no CI: " + s.median_ci.reason + "]";
    text += fmt::format("{:<8} {:<44} d5 {:>10.1f} us  native {:>10.1f} us  ratio {:.4f} {}\n", c.backend, c.name,
                        c.extra["d5_median_s"].get<double>() * 1e6, c.extra["native_median_s"].get<double>() * 1e6,
                        s.median, ci);
  }
  for (const auto& [group, o] : res.manifest["extra"]["overall"].items())
    text += fmt::format("overall ({}): median over {} cases of the per-case median ratio (d5 / native): {:.4f}{}  "
                        "(target {})\n",
                        group, o["cases"].get<size_t>(), o["median_ratio"].get<double>(),
                        o["ci_95"].is_array() ? fmt::format(" [{:.4f}, {:.4f}]", o["ci_95"][0].get<double>(),
                                                            o["ci_95"][1].get<double>())
                                              : std::string(" [no CI: fewer than 6 cases]"),
                        o["target"].get<std::string>());
  return text;
}

int run_overhead(const OverheadOpts& o, const GlobalOptions& g) {
  register_builtin_operators();
  D5_CHECK_ARG(o.settings.rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", o.settings.rounds);
  const std::string malloc_mode = o.malloc == "reuse" && keep_freed_memory() ? "reuse" : "default";
  ExperimentSettings settings = settings_from(g);
  const auto problems = select_problems(load_suite(o.suite, settings.seed), o.suite, o.filter, o.limit);
  std::vector<std::string> names = o.backends;
  if (names.empty()) names = native_libraries();
  names = chosen_backends(names);
  const int64_t max_memory = o.max_memory >= 0 ? o.max_memory : cpu_info().memory_bytes / 4;

  Results res;
  for (const auto& backend : names) {
    const auto info = find_backend(backend);
    for (const auto& p : problems) {
      CaseResult c;
      c.name = p.name;
      c.level = "L0";
      c.backend = backend;
      c.params = p.params;
      std::unique_ptr<Operator> op;
      if (!info) {
        c.state = CaseState::Skipped;
        c.detail = fmt::format("backend '{}' is not built into this d5", backend);
      } else if (!info->available) {
        c.state = CaseState::Skipped;
        c.detail = "backend unavailable: " + info->unavailable_reason;
      } else if (p.tensor_bytes > max_memory) {
        c.state = CaseState::Skipped;
        c.detail = fmt::format("needs {} bytes of tensors, over --max-memory {}", p.tensor_bytes, max_memory);
      } else {
        try {
          op = OpRegistry::global().create(p.spec, backend);
        } catch (const Unimplemented& e) {
          c.state = CaseState::Unimplemented;
          c.detail = e.what();
        }
      }
      if (op) {
        settings.stream(p.stream);
        c = overhead_case(p, o.suite, backend, *op, o.settings);
      }
      res.cases.push_back(std::move(c));
    }
  }
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {{"suite", o.suite},       {"filter", o.filter},
                           {"limit", o.limit},       {"backends", names},
                           {"rounds", o.settings.rounds}, {"round_seconds", o.settings.round_seconds},
                           {"min_us", o.settings.min_us}, {"malloc", malloc_mode},
                           {"overall", overall(res)}};
  if (o.out.format == "json" || !o.out.output.empty())
    emit(res, o.out);
  else
    std::cout << console_text(res);
  return exit_code_for(res);
}

}  // namespace

void register_ops_overhead(CLI::App& ops, const GlobalOptions& g, std::vector<Command>& subcommands) {
  auto* cmd = ops.add_subcommand(
      "overhead", "A backend's operator through deep500 against the same library called directly (ratio per problem)");
  auto o = std::make_shared<OverheadOpts>();
  cmd->add_option("--suite", o->suite, "Suite of GEMM or convolution problems, e.g. deepbench-gemm-training")
      ->required();
  cmd->add_option("--backend", o->backends,
                  "Backends, comma-separated (default: every one whose library this d5 can call directly)")
      ->delimiter(',');
  cmd->add_option("--limit", o->limit, "Only the first N problems (after --filter); 0 = all")
      ->check(CLI::NonNegativeNumber)
      ->default_val(3);
  cmd->add_option("--filter", o->filter, "Only problems whose name matches this regular expression (ECMAScript)");
  cmd->add_option("--rounds", o->settings.rounds, "Measured rounds per problem, each side once per round (>= 6)")
      ->default_val(10);
  cmd->add_option("--round-seconds", o->settings.round_seconds, "Seconds per side and round (sets the calls per round)")
      ->check(CLI::PositiveNumber)
      ->default_val(0.1);
  cmd->add_option("--min-us", o->settings.min_us, "Skip problems whose native call takes less (microseconds)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(50);
  cmd->add_option("--max-memory", o->max_memory,
                  "Skip problems whose tensors need more than this (bytes; default: a quarter of physical memory)")
      ->transform(CLI::AsSizeValue(true));
  cmd->add_option("--malloc", o->malloc,
                  "reuse: keep freed memory in the heap so both sides allocate alike; default: the C library's")
      ->check(CLI::IsMember({"reuse", "default"}))
      ->default_val("reuse");
  add_output_options(*cmd, o->out);
  subcommands.push_back({cmd, [o, &g] { return run_overhead(*o, g); }});
}

}  // namespace d5::cli
