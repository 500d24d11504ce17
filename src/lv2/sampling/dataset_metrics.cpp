// DatasetBias, DatasetLatency and the chi-square machinery behind them
// (include/deep500/train/dataset_metrics.h, docs/dataset-metrics.md).
#include "deep500/train/dataset_metrics.h"

#include <cmath>
#include <limits>

#include "deep500/core/error.h"
#include "deep500/metrics/timer.h"

namespace d5 {

namespace {

constexpr double kEps = 1e-16;
constexpr int kMaxIterations = 10'000'000;

// log(x^a e^-x / Gamma(a)): the common prefactor of the series and the continued fraction.
double log_prefactor(double a, double x) { return a * std::log(x) - x - std::lgamma(a); }

// P(a, x) by its power series (Numerical Recipes gser); converges fast for x < a + 1.
double gamma_p_series(double a, double x) {
  double ap = a, term = 1.0 / a, sum = term;
  for (int i = 0; i < kMaxIterations; ++i) {
    ap += 1;
    term *= x / ap;
    sum += term;
    if (std::abs(term) < std::abs(sum) * kEps) return sum * std::exp(log_prefactor(a, x));
  }
  D5_THROW(Internal, "incomplete gamma series did not converge for a = {}, x = {}", a, x);
}

// Q(a, x) by its continued fraction, evaluated with the modified Lentz method (NR gcf); converges
// fast for x >= a + 1.
double gamma_q_continued_fraction(double a, double x) {
  constexpr double kTiny = std::numeric_limits<double>::min() / kEps;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < kMaxIterations; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEps) return h * std::exp(log_prefactor(a, x));
  }
  D5_THROW(Internal, "incomplete gamma continued fraction did not converge for a = {}, x = {}", a, x);
}

void check_gamma_domain(double a, double x) {
  D5_CHECK_ARG(a > 0 && std::isfinite(a), "incomplete gamma: a must be finite and > 0, got {}", a);
  D5_CHECK_ARG(x >= 0 && !std::isnan(x), "incomplete gamma: x must be >= 0, got {}", x);
}

}  // namespace

double regularized_gamma_p(double a, double x) {
  check_gamma_domain(a, x);
  if (x == 0) return 0;
  if (std::isinf(x)) return 1;
  return x < a + 1 ? gamma_p_series(a, x) : 1 - gamma_q_continued_fraction(a, x);
}

double regularized_gamma_q(double a, double x) {
  check_gamma_domain(a, x);
  if (x == 0) return 1;
  if (std::isinf(x)) return 0;
  return x < a + 1 ? 1 - gamma_p_series(a, x) : gamma_q_continued_fraction(a, x);
}

double chi_square_sf(double x, double dof) {
  D5_CHECK_ARG(dof > 0, "chi-square: degrees of freedom must be > 0, got {}", dof);
  D5_CHECK_ARG(!std::isnan(x), "chi-square: statistic is NaN");
  if (x <= 0) return 1;
  return regularized_gamma_q(dof / 2, x / 2);
}

ChiSquareTest chi_square_uniform(std::span<const int64_t> counts) {
  D5_CHECK_ARG(counts.size() >= 2, "chi-square against uniform needs at least 2 bins, got {}", counts.size());
  ChiSquareTest t;
  for (int64_t c : counts) {
    D5_CHECK_ARG(c >= 0, "chi-square: negative count {}", c);
    t.observations += c;
  }
  D5_CHECK_ARG(t.observations > 0, "chi-square against uniform: no observations");
  const double expected = static_cast<double>(t.observations) / static_cast<double>(counts.size());
  for (int64_t c : counts) {
    const double diff = static_cast<double>(c) - expected;
    t.statistic += diff * diff / expected;
  }
  t.dof = static_cast<int64_t>(counts.size()) - 1;
  t.p_value = chi_square_sf(t.statistic, static_cast<double>(t.dof));
  return t;
}

DatasetBias::DatasetBias(int64_t classes) : histogram_(static_cast<size_t>(std::max<int64_t>(classes, 0)), 0) {
  D5_CHECK_ARG(classes >= 2, "DatasetBias needs a classification dataset with >= 2 classes, got {}", classes);
}

void DatasetBias::count(int64_t label) {
  D5_CHECK_ARG(label >= 0 && label < static_cast<int64_t>(histogram_.size()),
               "DatasetBias: label {} outside [0, {}) (does the dataset's class count match?)", label,
               histogram_.size());
  ++histogram_[static_cast<size_t>(label)];
}

void DatasetBias::observe(const Batch& batch) {
  const auto it = batch.find(kDataLabels);
  D5_CHECK_ARG(it != batch.end(), "DatasetBias: the batch has no '{}' tensor", kDataLabels);
  const Tensor& labels = it->second;
  D5_CHECK_ARG(is_integral(labels.dtype()) && labels.dtype() != DType::boolean,
               "DatasetBias: '{}' must hold integer class labels, got {}", kDataLabels, labels.desc().to_string());
  for (int64_t i = 0; i < labels.numel(); ++i) count(static_cast<int64_t>(labels.get(i)));
}

void DatasetBias::observe_labels(std::span<const int64_t> labels) {
  for (int64_t l : labels) count(l);
}

void DatasetBias::end() {
  int64_t total = 0;
  for (int64_t c : histogram_) total += c;
  if (total > 0) add_sample(test().statistic);
}

void DatasetBias::reset() {
  Metric::reset();
  std::fill(histogram_.begin(), histogram_.end(), 0);
}

MetricRecord DatasetBias::result() const {
  MetricRecord r = Metric::result();
  r.info = {{"classes", histogram_.size()}, {"histogram", histogram_}};
  int64_t total = 0;
  for (int64_t c : histogram_) total += c;
  r.info["observations"] = total;
  if (total > 0) {
    const ChiSquareTest t = test();
    r.info["chi_square"] = t.statistic;
    r.info["dof"] = t.dof;
    r.info["p_value"] = t.p_value;
    r.info["expected_per_class"] = static_cast<double>(total) / static_cast<double>(histogram_.size());
  }
  return r;
}

void DatasetLatency::begin() { started_ns_ = wall_now_ns(); }

void DatasetLatency::end() {
  D5_CHECK(started_ns_ >= 0, Internal, "DatasetLatency::end without begin");
  add_sample(static_cast<double>(wall_now_ns() - started_ns_) * 1e-9);
  started_ns_ = -1;
  if (source_.empty()) source_ = "begin/end";
}

void DatasetLatency::add_loader_timings(const DataLoader& loader) {
  for (const auto& t : loader.timings()) add_sample(t.produce_s);
  source_ = "loader";
}

void DatasetLatency::measure_fetch(const Dataset& dataset, Sampler& sampler, int64_t batches) {
  D5_CHECK_ARG(batches > 0, "DatasetLatency: batches must be > 0, got {}", batches);
  for (int64_t i = 0; i < batches; ++i) {
    std::vector<int64_t> indices = sampler.next();
    if (indices.empty()) {
      sampler.reset();
      indices = sampler.next();
      D5_CHECK_ARG(!indices.empty(), "DatasetLatency: the {} sampler produces no batches (dataset of {} samples)",
                   sampler.name(), dataset.size());
    }
    const int64_t t0 = wall_now_ns();
    const Batch batch = dataset.fetch(indices);
    add_sample(static_cast<double>(wall_now_ns() - t0) * 1e-9);
  }
  source_ = "fetch";
}

MetricRecord DatasetLatency::result() const {
  MetricRecord r = Metric::result();
  r.info = {{"source", source_.empty() ? "none" : source_}, {"clock", "wall"}};
  return r;
}

}  // namespace d5
