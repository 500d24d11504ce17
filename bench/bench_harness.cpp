// Harness overhead: the same workload timed by d5's runner (MetricSet + WallTime +
// run_measured) and by a hand-written steady_clock loop, interleaved round by round in one
// process so machine noise hits both alike. Prints per-round ratios summarized as a median with
// its 95% CI. A ratio near 1.00 means the harness adds nothing measurable to what it reports.
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "deep500/metrics/manifest.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/statistics.h"

namespace {

// ~50-100 us of dependent floating-point work on one core; no memory traffic to speak of.
double workload(std::vector<float>& a) {
  double acc = 0;
  for (int rep = 0; rep < 4; ++rep)
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = a[i] * 0.999f + 0.001f;
      acc += a[i];
    }
  return acc;
}

double median_of(std::vector<double> v) { return d5::percentile(v, 50); }

}  // namespace

int main(int argc, char** argv) {
  d5::set_invocation(argc, argv);
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];

  std::vector<float> data(16384, 1.0f);
  volatile double sink = 0;
  constexpr int kRounds = 21, kRunsPerRound = 50;

  std::vector<double> reported_ratio, cost_ratio, hand_medians;
  for (int round = 0; round < kRounds; ++round) {
    // Hand-written loop: the best a careful person would do without a harness.
    std::vector<double> hand;
    const auto hand_start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRunsPerRound; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      sink = sink + workload(data);
      hand.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double hand_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - hand_start).count();

    d5::MetricSet metrics;
    metrics.add(std::make_unique<d5::WallTime>());
    d5::RunSettings s;
    s.warmup_runs = 0;
    s.min_runs = s.max_runs = kRunsPerRound;
    s.target_ci_ratio = 1e-9;  // never stop early: both sides do the same number of runs
    const auto harness_start = std::chrono::steady_clock::now();
    d5::run_measured([&] { sink = sink + workload(data); }, metrics, s);
    const double harness_total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - harness_start).count();

    if (round == 0) continue;  // the first round warms caches and the frequency governor
    reported_ratio.push_back(median_of(metrics[0].samples()) / median_of(hand));
    cost_ratio.push_back(harness_total / hand_total);
    hand_medians.push_back(median_of(hand));
  }

  auto line = [](const char* what, const std::vector<double>& r) {
    const auto ci = d5::median_ci(r);
    std::cout << fmt::format("{:<52} median {:.4f}  95% CI {}\n", what, d5::percentile(r, 50),
                             ci.available ? fmt::format("[{:.4f}, {:.4f}]", ci.lower, ci.upper)
                                          : "unavailable: " + ci.reason);
  };
  std::cout << fmt::format("workload median {:.1f} us; {} rounds x {} runs, interleaved\n",
                           d5::percentile(hand_medians, 50) * 1e6, kRounds - 1, kRunsPerRound);
  line("reported time, harness / hand loop", reported_ratio);
  line("wall cost per run incl. bookkeeping, harness / hand", cost_ratio);

  if (!json_path.empty()) {
    d5::Results res;
    res.manifest = d5::make_manifest({});
    for (auto [name, r] : {std::pair{"harness_reported_time_ratio", &reported_ratio},
                           std::pair{"harness_wall_cost_ratio", &cost_ratio}}) {
      d5::CaseResult c;
      c.name = name;
      c.level = "harness";
      c.params = {{"rounds", kRounds - 1}, {"runs_per_round", kRunsPerRound}};
      d5::MetricRecord m;
      m.name = "ratio";
      m.unit = "x";
      m.samples = *r;
      m.summary = d5::summarize(*r);
      c.metrics.push_back(m);
      res.cases.push_back(c);
    }
    d5::write_results(json_path, res);
  }
  return sink == 12345.678 ? 1 : 0;  // keeps the work observable
}
