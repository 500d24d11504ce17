#pragma once
// Level 2 data metrics (docs/dataset-metrics.md): DatasetBias (is the label stream the sampler
// produces balanced?) and DatasetLatency (how long does it take to produce a batch?).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deep500/train/data_loader.h"
#include "deep500/train/dataset.h"
#include "deep500/metrics/metric.h"
#include "deep500/train/sampler.h"

namespace d5 {

// Regularized incomplete gamma functions P(a, x) = gamma(a, x) / Gamma(a) and Q = 1 - P, for
// a > 0 and x >= 0 (series for x < a + 1, Lentz continued fraction otherwise; relative accuracy
// ~1e-14). InvalidArgument outside the domain or for NaN.
double regularized_gamma_p(double a, double x);
double regularized_gamma_q(double a, double x);
// P(X >= x) for X ~ chi-square with `dof` degrees of freedom: Q(dof / 2, x / 2).
double chi_square_sf(double x, double dof);

// Pearson's chi-square test of observed counts against the uniform distribution over the bins.
struct ChiSquareTest {
  double statistic = 0;
  int64_t dof = 0;  // bins - 1
  double p_value = 1;
  int64_t observations = 0;
};
// InvalidArgument with fewer than 2 bins, a negative count, or no observations.
ChiSquareTest chi_square_uniform(std::span<const int64_t> counts);

// The label histogram over all batches observed (across epochs), tested against uniform. One
// sample per end(): the chi-square statistic of the histogram so far (so one end() per epoch
// gives its evolution). result().info holds the histogram, the statistic, dof and p-value.
class DatasetBias : public Metric {
 public:
  explicit DatasetBias(int64_t classes);
  std::string name() const override { return "DatasetBias"; }
  std::string unit() const override { return "chi2"; }
  // Counts the batch's "labels" tensor (any integer dtype). InvalidArgument for a batch without
  // labels or a label outside [0, classes).
  void observe(const Batch& batch);
  void observe_labels(std::span<const int64_t> labels);
  void end() override;
  MetricRecord result() const override;
  void reset() override;

  const std::vector<int64_t>& histogram() const { return histogram_; }
  ChiSquareTest test() const { return chi_square_uniform(histogram_); }

 private:
  void count(int64_t label);
  std::vector<int64_t> histogram_;
};

// Time to produce one batch (read + decode + assemble [+ transforms]), in seconds; the summary
// gives the median with its 95% CI. Samples come from a loader's per-batch timings, from timing
// Dataset::fetch directly, or from begin()/end() around the caller's own production code.
class DatasetLatency : public Metric {
 public:
  std::string name() const override { return "DatasetLatency"; }
  std::string unit() const override { return "s"; }
  void begin() override;
  void end() override;
  MetricRecord result() const override;

  // Appends the produce time of every batch the loader has handed out (BatchTiming::produce_s).
  void add_loader_timings(const DataLoader& loader);
  // Draws `batches` index batches from the sampler (moving to the next epoch when one ends) and
  // times dataset.fetch for each; nothing overlaps, so this is the unhidden cost per batch.
  void measure_fetch(const Dataset& dataset, Sampler& sampler, int64_t batches);

 private:
  int64_t started_ns_ = -1;
  std::string source_;  // where the samples came from, for result().info
};

}  // namespace d5
