// d5 serve-bench: inference scenarios after MLPerf LoadGen on graph executors (docs/serve-bench.md).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/build_info.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/reporter.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/net/inference_scenarios.h"
#include "net_loader.h"

namespace d5::cli {

namespace {

struct ServeOpts {
  std::string model;
  std::vector<std::string> backends, scenarios = {"single-stream", "offline"};
  int64_t offline_batch = 32, streams = 8;
  int64_t dynamic_batch = 1;  // server: up to this many one-sample queries per executor call
  bool search_qps = false;
  int search_steps = 6, search_repeats = 1;
  ScenarioOptions scenario;
  OutputOptions out;
};

CaseResult scenario_case(Network& net, const std::string& backend, InferenceScenario scenario, const ServeOpts& o,
                         uint64_t seed) {
  CaseResult c;
  c.name = fmt::format("{}/{}/{}", net.name(), backend, to_string(scenario));
  c.level = "L1";
  c.backend = backend;
  ScenarioOptions so = o.scenario;
  so.scenario = scenario;
  so.dynamic_batching = scenario == InferenceScenario::server && o.dynamic_batch > 1;
  // The CUDA backend's operators live on cuda:0 (cuda_common.h); every other executor on the host.
  so.energy_device = backend == "cuda" ? Device::cuda(0) : Device::cpu();
  c.params = {{"network", net.name()}, {"scenario", to_string(scenario)}, {"min_duration_s", so.min_duration_s}};
  if (skip_unbuilt_executor(backend, c)) return c;
  std::unique_ptr<GraphExecutor> ex;
  try {
    ex = make_executor(net, backend);
  } catch (const Unimplemented& e) {
    c.state = CaseState::Unimplemented;
    c.detail = e.what();
    return c;
  }
  const TensorMap feeds = synthetic_feeds(net, seed);
  nlohmann::json search;
  ScenarioResult r;
  if (scenario == InferenceScenario::server && o.search_qps) {
    const RepeatedQpsSearch rep = repeat_server_qps_search(*ex, feeds, so, o.search_steps, o.search_repeats);
    const QpsSearch& q = rep.searches[static_cast<size_t>(rep.median_search)];
    search = {{"capacity_qps", q.capacity_qps}, {"best_qps", q.best_qps}, {"runs", nlohmann::json::array()}};
    for (const auto& run : q.runs)
      search["runs"].push_back({{"target_qps", run.target_qps}, {"valid", run.valid}, {"reason", run.reason},
                                {"issue_lateness_max_s", run.issue_lateness_max_s},
                                {"p_bound_s", run.latency_bound.available ? nlohmann::json(run.latency_bound.value)
                                                                          : nlohmann::json(nullptr)}});
    if (o.search_repeats > 1) {
      const MedianCI& ci = rep.summary.median_ci;
      search["repeats"] = o.search_repeats;
      search["best_qps_per_search"] = rep.best_qps;
      search["best_qps_median"] = rep.summary.median;
      search["best_qps_ci"] = ci.available ? nlohmann::json{ci.lower, ci.upper} : nlohmann::json(nullptr);
      search["reported_search"] = rep.median_search;
      c.metrics.push_back(metric_record("best_qps", "queries/s", rep.best_qps));
    }
    if (q.best_run < 0) {
      r = q.runs.back();
      r.valid = false;
      r.reason = fmt::format("no rate tried met the {:g} s bound (capacity {:.4g} queries/s one at a time; {})",
                             so.latency_bound_s, q.capacity_qps, r.reason);
    } else {
      r = q.runs[static_cast<size_t>(q.best_run)];
    }
  } else {
    r = run_inference_scenario(*ex, feeds, so);
  }
  c.params["batch"] = r.batch;
  if (scenario != InferenceScenario::offline) {
    c.metrics.push_back(metric_record("latency", "s", r.latencies_s));
    c.metrics.push_back(metric_record("throughput", "samples/s", {r.throughput}));
  } else {  // offline's score is its throughput; the completions' spacing shows how steady it was
    c.metrics.push_back(metric_record("throughput", "samples/s", {r.throughput}));
    c.metrics.push_back(metric_record("completion_interval", "s", r.intervals_s));
  }
  if (r.energy_available) c.metrics.push_back(metric_record("energy_per_sample", "J", {r.joules_per_sample}));
  if (r.device_energy_available)
    c.metrics.push_back(metric_record("device_energy_per_sample", "J", {r.device_joules_per_sample}));
  c.outcome = RunOutcome{r.valid ? Validity::Valid : Validity::Invalid, r.reason, so.warmup_queries,
                         static_cast<int>(std::min<int64_t>(r.queries, INT32_MAX)), r.duration_s, 0};
  c.extra = {{"scenario", to_string(scenario)}, {"queries", r.queries},         {"samples", r.samples},
             {"duration_s", r.duration_s},      {"throughput", r.throughput}, {"min_queries", r.min_queries},
             {"energy", r.energy_available ? nlohmann::json{{"joules_per_sample", r.joules_per_sample}}
                                           : nlohmann::json{{"unavailable", r.energy_reason}}},
             {"device_energy", r.device_energy_available
                                   ? nlohmann::json{{"joules_per_sample", r.device_joules_per_sample},
                                                    {"source", r.device_energy_source}}
                                   : nlohmann::json{{"unavailable", r.device_energy_reason}}}};
  if (scenario == InferenceScenario::server) {
    const PercentileBound& b = r.latency_bound;
    c.params["latency_bound_s"] = so.latency_bound_s;
    c.params["percentile"] = so.server_percentile;
    c.extra["target_qps"] = r.target_qps;
    c.extra["achieved_qps"] = r.achieved_qps;
    c.extra["latency_bound"] = {{"percentile", b.p}, {"confidence", b.confidence}, {"available", b.available},
                                {"rank", b.rank},    {"value_s", b.value},         {"achieved", b.achieved},
                                {"bound_s", so.latency_bound_s}, {"met", r.meets_latency_bound}};
    c.extra["issue_lateness"] = {{"p99_s", r.issue_lateness_p99_s}, {"max_s", r.issue_lateness_max_s}};
    if (!search.is_null()) c.extra["search"] = search;
    if (so.dynamic_batching) {
      std::vector<double> sizes(r.batches.begin(), r.batches.end());
      c.metrics.push_back(metric_record("queries_per_call", "queries", sizes));
      const double mean = sizes.empty() ? 0 : std::accumulate(sizes.begin(), sizes.end(), 0.0) / static_cast<double>(sizes.size());
      c.params["dynamic_batch"] = o.dynamic_batch;
      c.params["batch_timeout_s"] = so.batch_timeout_s;
      c.extra["dynamic_batching"] = {{"max", o.dynamic_batch}, {"timeout_s", so.batch_timeout_s},
                                     {"calls", sizes.size()}, {"mean_queries_per_call", mean}};
    }
    c.detail = fmt::format("{} {:.4g} queries/s (Poisson, {} queries): p{:g} latency at most {} with {:g}% "
                           "confidence, bound {}",
                           search.is_null() ? "at" : "best rate", r.target_qps, r.queries, 100 * b.p,
                           b.available ? format_seconds(b.value) : "(no bound)", 100 * b.confidence,
                           format_seconds(so.latency_bound_s));
    if (so.dynamic_batching)
      c.detail += fmt::format("; dynamic batching: {} calls, {:.2f} queries per call (at most {}, timeout {})",
                              r.batches.size(), c.extra["dynamic_batching"]["mean_queries_per_call"].get<double>(),
                              o.dynamic_batch, format_seconds(so.batch_timeout_s));
    if (search.contains("repeats"))
      c.detail += search["best_qps_ci"].is_null()
                      ? fmt::format("; {} searches: median best rate {:.4g} queries/s (no CI under 6 searches)",
                                    o.search_repeats, search["best_qps_median"].get<double>())
                      : fmt::format("; {} searches: median best rate {:.4g} queries/s, 95% CI [{:.4g}, {:.4g}]",
                                    o.search_repeats, search["best_qps_median"].get<double>(),
                                    search["best_qps_ci"][0].get<double>(), search["best_qps_ci"][1].get<double>());
  } else if (scenario == InferenceScenario::single_stream || scenario == InferenceScenario::multi_stream) {
    const PercentileBound& b = r.latency_bound;
    c.params["percentile"] = b.p;
    c.params["confidence"] = so.confidence;
    c.extra["latency_bound"] = {{"percentile", b.p},  {"confidence", b.confidence}, {"available", b.available},
                                {"rank", b.rank},     {"value_s", b.value},         {"achieved", b.achieved},
                                {"min_samples", b.min_samples}, {"reason", b.reason}};
    c.detail = b.available ? fmt::format("p{:g} latency at most {} with {:g}% confidence ({} queries, early-stopping "
                                         "estimate: the {}th fastest)",
                                         100 * b.p, format_seconds(b.value), 100 * b.confidence, r.queries, b.rank)
                           : b.reason;
  } else {
    c.detail = fmt::format("{:.1f} samples/s over {} queries of {} samples in {:.3g} s", r.throughput, r.queries,
                           r.batch, r.duration_s);
  }
  if (!r.energy_available) c.detail += fmt::format("; energy not measured: {}", r.energy_reason);
  else c.detail += fmt::format("; {:.3g} J per sample", r.joules_per_sample);
  if (r.device_energy_available)
    c.detail += fmt::format("; device {:.3g} J per sample ({})", r.device_joules_per_sample, r.device_energy_source);
  else if (so.energy_device.kind != DeviceKind::cpu)
    c.detail += fmt::format("; device energy not measured: {}", r.device_energy_reason);
  return c;
}

int run_serve_bench(ServeOpts o, const GlobalOptions& g) {
  register_builtin_operators();
  ExperimentSettings settings = settings_from(g);
  o.scenario.seed = settings.stream("serve-bench/arrivals").seed();  // the server's Poisson arrivals
  std::vector<InferenceScenario> scenarios;
  for (const auto& s : o.scenarios) scenarios.push_back(parse_inference_scenario(s));
  const std::vector<std::string> backends = o.backends.empty() ? executor_backends() : o.backends;
  Results res;
  for (InferenceScenario s : scenarios) {
    // Single-stream and server queries are one sample; offline runs the network at its batch.
    // Server with dynamic batching: the network runs at the largest batch; smaller ones are padded.
    const int64_t batch = s == InferenceScenario::offline        ? o.offline_batch
                          : s == InferenceScenario::multi_stream ? o.streams
                          : s == InferenceScenario::server       ? o.dynamic_batch
                                                                 : 1;
    LoadedNetwork loaded = load_network(o.model, batch, NetMode::Inference);
    for (const auto& b : backends)
      res.cases.push_back(scenario_case(loaded.network, b, s, o, settings.stream("serve-bench/feeds").seed()));
  }
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {{"model", o.model},          {"scenarios", o.scenarios}, {"offline_batch", o.offline_batch},
                           {"streams", o.streams},       {"dynamic_batch", o.dynamic_batch},
                           {"batch_timeout_s", o.scenario.batch_timeout_s}};
  emit(res, o.out);
  return exit_code_for(res);
}

}  // namespace

Command register_serve_bench(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("serve-bench",
                                 "Inference scenarios after MLPerf LoadGen: single-stream (p90 latency bound), multi-stream (p99), offline "
                                 "(throughput), server (Poisson arrivals, p99 within a latency bound, a rate search); "
                                 "VALID/INVALID by query counts, duration and bound");
  auto o = std::make_shared<ServeOpts>();
  cmd->add_option("model", o->model, "An ONNX file (MODEL.onnx) or a model zoo name (see 'd5 models list')")->required();
  cmd->add_option("--backend", o->backends, "Executors, comma-separated (default: every executor built in)")
      ->delimiter(',');
  cmd->add_option("--scenario", o->scenarios, "Scenarios, comma-separated: single-stream, multi-stream, offline, server")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--min-duration", o->scenario.min_duration_s, "Seconds each scenario runs at least")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--min-queries", o->scenario.min_queries,
                  "Queries (single-stream) or samples (offline) a VALID run needs (default: single-stream what its "
                  "percentile bound needs, 44 for p90 at 99%; offline 1024)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-queries", o->scenario.max_queries, "Queries after which a scenario stops")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--percentile", o->scenario.percentile, "Single-stream's latency percentile, as a fraction")
      ->check(CLI::Range(0.5, 0.9999))
      ->capture_default_str();
  cmd->add_option("--confidence", o->scenario.confidence, "Confidence of the percentile's upper bound")
      ->check(CLI::Range(0.5, 0.9999))
      ->capture_default_str();
  cmd->add_option("--offline-batch", o->offline_batch, "Samples per query in the offline scenario")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--streams", o->streams, "Samples per query in the multi-stream scenario (one per stream)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--target-qps", o->scenario.target_qps, "Server: the Poisson arrival rate, queries per second")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--latency-bound", o->scenario.latency_bound_s,
                  "Server: the latency (s) the p99 must meet, as an upper bound at --confidence")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--dynamic-batch", o->dynamic_batch,
                  "Server: batch up to N one-sample queries per executor call (the network runs at batch N; fewer "
                  "queries are padded); 1: off")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--batch-timeout", o->scenario.batch_timeout_s,
                  "Server with --dynamic-batch: seconds the oldest queued query waits for others")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--search-qps", o->search_qps,
                "Server: search the highest rate that meets --latency-bound (bisection from the one-at-a-time capacity)");
  cmd->add_option("--search-steps", o->search_steps, "Server runs of the rate search")
      ->check(CLI::Range(1, 30))
      ->capture_default_str();
  cmd->add_option("--search-repeats", o->search_repeats,
                  "Independent rate searches: the rate is their median with its 95% CI (from 6 on); the search "
                  "nearest the median is the one reported")
      ->check(CLI::Range(1, 50))
      ->capture_default_str();
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_serve_bench(*o, g); }};
}

}  // namespace d5::cli
