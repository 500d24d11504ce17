#include "deep500/metrics/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/metrics/reporter.h"

namespace d5 {

namespace {

// Above this many samples on a side, evenly spaced quantiles stand in for the sample, so the
// pairwise ratios (n_a * n_b of them) stay within 4e6 doubles.
constexpr size_t kMaxSide = 2000;
// The exact null distribution is recomputed per probe of the critical value; above this product
// the normal approximation is within a rank of it and much cheaper.
constexpr int64_t kExactMaxProduct = 2500;
constexpr double kTailRelTol = 1e-10;

std::vector<double> sorted_logs(std::span<const double> x, bool& thinned) {
  std::vector<double> l(x.size());
  std::transform(x.begin(), x.end(), l.begin(), [](double v) { return std::log(v); });
  std::sort(l.begin(), l.end());
  if (l.size() <= kMaxSide) return l;
  thinned = true;
  std::vector<double> q(kMaxSide);
  for (size_t k = 0; k < kMaxSide; ++k)
    q[k] = l[static_cast<size_t>(std::llround(static_cast<double>(k) * static_cast<double>(l.size() - 1) /
                                              static_cast<double>(kMaxSide - 1)))];
  return q;
}

// The largest k >= 0 with P(U <= k - 1) <= tail; the CI is then [D_(k), D_(nm+1-k)].
int64_t exact_critical_rank(int64_t n, int64_t m, double tail) {
  int64_t lo = 0, hi = n * m / 2 + 1;  // P(U <= -1) = 0 always qualifies; past the middle never does
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (mann_whitney_null_cdf(n, m, mid - 1) <= tail * (1 + kTailRelTol))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

std::string format_value(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "n/a";
  if (unit == "s") return format_seconds(v);
  if (unit == "bytes") return format_bytes(v);
  return fmt::format("{:.4g} {}", v, unit);
}

std::string percent(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1) * 100); }

}  // namespace

RatioCI ratio_ci(std::span<const double> a, std::span<const double> b, double level) {
  D5_CHECK_ARG(!a.empty() && !b.empty(), "ratio CI: both samples need at least one value, got {} and {}",
               a.size(), b.size());
  D5_CHECK_ARG(level > 0 && level < 1, "confidence level must be in (0, 1), e.g. 0.95; got {}", level);
  for (auto side : {a, b})
    for (double v : side) D5_CHECK_ARG(!std::isnan(v), "ratio CI: a sample is NaN; drop failed measurements first");
  RatioCI r;
  r.estimate = std::numeric_limits<double>::quiet_NaN();
  const auto positive = [](std::span<const double> s) {
    return std::all_of(s.begin(), s.end(), [](double v) { return v > 0; });
  };
  if (!positive(a) || !positive(b)) {
    r.reason = "a ratio needs positive samples (times, rates, sizes); some are zero or negative";
    return r;
  }
  const auto la = sorted_logs(a, r.thinned), lb = sorted_logs(b, r.thinned);
  const auto n = static_cast<int64_t>(la.size()), m = static_cast<int64_t>(lb.size());
  std::vector<double> d;
  d.reserve(static_cast<size_t>(n * m));
  for (double y : lb)
    for (double x : la) d.push_back(y - x);
  std::sort(d.begin(), d.end());
  const auto nm = static_cast<size_t>(n * m);
  r.estimate = std::exp(nm % 2 == 1 ? d[nm / 2] : (d[nm / 2 - 1] + d[nm / 2]) / 2);

  const double tail = (1 - level) / 2;
  int64_t k = 0;
  if (n * m <= kExactMaxProduct) {
    r.exact = true;
    k = exact_critical_rank(n, m, tail);
    if (k >= 1) r.achieved_level = 1 - 2 * mann_whitney_null_cdf(n, m, k - 1);
  } else {
    const double sigma = std::sqrt(static_cast<double>(n * m) * static_cast<double>(n + m + 1) / 12);
    k = static_cast<int64_t>(std::floor(static_cast<double>(n * m) / 2 - normal_quantile(1 - tail) * sigma + 0.5));
    r.achieved_level = level;
  }
  if (k < 1) {
    r.reason = fmt::format("{} and {} samples are too few for a {:g}% ratio CI (4 and 4 suffice at 95%)", n, m,
                           level * 100);
    r.achieved_level = 0;
    return r;
  }
  r.available = true;
  r.lower_rank = k;
  r.upper_rank = n * m + 1 - k;
  r.lower = std::exp(d[static_cast<size_t>(k - 1)]);
  r.upper = std::exp(d[static_cast<size_t>(n * m - k)]);
  return r;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Faster: return "FASTER";
    case Verdict::Slower: return "SLOWER";
    case Verdict::Same: return "SAME";
    case Verdict::Uncertain: return "UNCERTAIN";
  }
  return "UNCERTAIN";
}

Direction direction_for_unit(const std::string& unit) {
  if (unit.find("/s") != std::string::npos) return Direction::HigherIsBetter;
  if (unit == "s" || unit == "ms" || unit == "us" || unit == "ns" || unit == "bytes" || unit == "J")
    return Direction::LowerIsBetter;
  return Direction::Unknown;
}

CaseComparison compare_samples(std::span<const double> a, std::span<const double> b, Direction direction,
                               const CompareOptions& o) {
  D5_CHECK_ARG(o.tolerance >= 0, "the tolerance must be >= 0, got {}", o.tolerance);
  D5_CHECK_ARG(o.alpha > 0 && o.alpha < 1, "the significance level must be in (0, 1), got {}", o.alpha);
  CaseComparison c;
  c.direction = direction;
  c.n_a = static_cast<int64_t>(a.size());
  c.n_b = static_cast<int64_t>(b.size());
  if (a.empty() || b.empty()) {
    c.reason = fmt::format("no samples in {}", a.empty() ? "the baseline" : "the new result");
    return c;
  }
  c.median_a = percentile(a, 50);
  c.median_b = percentile(b, 50);
  c.ratio = ratio_ci(a, b, o.level);
  c.test = mann_whitney_u(a, b);
  c.tested = true;
  if (direction == Direction::Unknown) {
    c.reason = "which way is better is unknown for this metric's unit; say it with --lower-is-better or "
               "--higher-is-better";
    return c;
  }
  if (!c.ratio.available) {
    c.reason = c.ratio.reason;
    return c;
  }
  const double band_lo = 1 / (1 + o.tolerance), band_hi = 1 + o.tolerance;
  const std::string ci = fmt::format("CI [{:.3f}, {:.3f}]", c.ratio.lower, c.ratio.upper);
  if (c.ratio.lower >= band_lo && c.ratio.upper <= band_hi) {
    c.verdict = Verdict::Same;
    c.reason = fmt::format("{} within the tolerance [{:.3f}, {:.3f}]", ci, band_lo, band_hi);
    return c;
  }
  const bool excludes_one = c.ratio.upper < 1 || c.ratio.lower > 1;
  const bool outside_band = c.ratio.estimate < band_lo || c.ratio.estimate > band_hi;
  if (c.test.p_value < o.alpha && excludes_one && outside_band) {
    const bool smaller = c.ratio.estimate < 1;
    c.verdict = smaller == (direction == Direction::LowerIsBetter) ? Verdict::Faster : Verdict::Slower;
    c.reason = fmt::format("{} {}, p = {:.2g}", percent(c.ratio.estimate), ci, c.test.p_value);
    return c;
  }
  if (c.test.p_value >= o.alpha || !excludes_one)
    c.reason = fmt::format("no significant difference (p = {:.2g}) but the {} reaches beyond the tolerance "
                           "±{:g}%: more samples would decide",
                           c.test.p_value, ci, o.tolerance * 100);
  else
    c.reason = fmt::format("a significant but small difference ({}, p = {:.2g}); the {} reaches beyond the "
                           "tolerance ±{:g}%",
                           percent(c.ratio.estimate), c.test.p_value, ci, o.tolerance * 100);
  return c;
}

int Comparison::count(Verdict v) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [v](const auto& c) { return c.verdict == v; }));
}

namespace {

std::vector<std::string> case_keys(const Results& r) {
  std::map<std::string, int> seen;
  std::vector<std::string> keys;
  for (const auto& c : r.cases) {
    std::string key = c.backend.empty() ? c.name : c.name + " @ " + c.backend;
    if (const int k = ++seen[key]; k > 1) key += fmt::format(" #{}", k);
    keys.push_back(std::move(key));
  }
  return keys;
}

const MetricRecord* find_metric(const CaseResult& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

CaseComparison compare_case(const CaseResult& a, const CaseResult& b, const CompareOptions& o) {
  CaseComparison c;
  const std::string metric = !o.metric.empty() ? o.metric : a.metrics.empty() ? "" : a.metrics.front().name;
  c.metric = metric;
  const MetricRecord* ma = find_metric(a, metric);
  const MetricRecord* mb = find_metric(b, metric);
  if (ma == nullptr || mb == nullptr) {
    c.reason = metric.empty() ? "the baseline case has no metrics"
                              : fmt::format("metric '{}' is missing in the {}", metric,
                                            ma == nullptr ? "baseline" : "new result");
    return c;
  }
  if (a.state != CaseState::Passed || b.state != CaseState::Passed) {
    const CaseResult& bad = a.state != CaseState::Passed ? a : b;
    c.reason = fmt::format("the {} case is {}{}", &bad == &a ? "baseline" : "new", to_string(bad.state),
                           bad.detail.empty() ? "" : ": " + bad.detail);
    return c;
  }
  const Direction dir = o.direction != Direction::Unknown ? o.direction : direction_for_unit(ma->unit);
  c = compare_samples(ma->samples, mb->samples, dir, o);
  c.metric = metric;
  c.unit = ma->unit;
  return c;
}

const char* to_string(Direction d) {
  switch (d) {
    case Direction::LowerIsBetter: return "lower_is_better";
    case Direction::HigherIsBetter: return "higher_is_better";
    case Direction::Unknown: return "unknown";
  }
  return "unknown";
}

nlohmann::json nullable(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

Comparison compare_results(const Results& a, const Results& b, const CompareOptions& options) {
  Comparison out;
  out.options = options;
  const auto ka = case_keys(a), kb = case_keys(b);
  std::map<std::string, size_t> in_b;
  for (size_t i = 0; i < kb.size(); ++i) in_b[kb[i]] = i;
  for (size_t i = 0; i < ka.size(); ++i) {
    auto it = in_b.find(ka[i]);
    if (it == in_b.end()) {
      out.only_in_a.push_back(ka[i]);
      continue;
    }
    CaseComparison c = compare_case(a.cases[i], b.cases[it->second], options);
    c.key = ka[i];
    out.cases.push_back(std::move(c));
    in_b.erase(it);
  }
  for (size_t i = 0; i < kb.size(); ++i)
    if (in_b.count(kb[i])) out.only_in_b.push_back(kb[i]);
  return out;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j = {{"schema", "deep500.compare"},
                      {"schema_version", 1},
                      {"options",
                       {{"metric", c.options.metric.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.options.metric)},
                        {"level", c.options.level},
                        {"alpha", c.options.alpha},
                        {"tolerance", c.options.tolerance}}},
                      {"cases", nlohmann::json::array()},
                      {"only_in_baseline", c.only_in_a},
                      {"only_in_new", c.only_in_b}};
  for (const auto& k : c.cases) {
    nlohmann::json ratio = {{"estimate", nullable(k.ratio.estimate)}, {"available", k.ratio.available},
                            {"level", c.options.level},              {"exact", k.ratio.exact},
                            {"thinned", k.ratio.thinned}};
    if (k.ratio.available) {
      ratio["lower"] = k.ratio.lower;
      ratio["upper"] = k.ratio.upper;
      ratio["achieved_level"] = k.ratio.achieved_level;
    } else if (!k.ratio.reason.empty()) {
      ratio["reason"] = k.ratio.reason;
    }
    nlohmann::json e = {{"case", k.key},       {"metric", k.metric},   {"unit", k.unit},
                        {"direction", to_string(k.direction)},         {"n_baseline", k.n_a},
                        {"n_new", k.n_b},      {"verdict", to_string(k.verdict)}, {"reason", k.reason}};
    if (k.n_a > 0 && k.n_b > 0) {
      e["median_baseline"] = k.median_a;
      e["median_new"] = k.median_b;
      e["ratio_of_medians"] = nullable(k.median_b / k.median_a);
    }
    if (k.tested) {
      e["ratio"] = ratio;
      e["mann_whitney"] = {{"u_new", k.test.u_y}, {"p_value", k.test.p_value}, {"exact", k.test.exact}};
    }
    j["cases"].push_back(std::move(e));
  }
  j["summary"] = {{"faster", c.count(Verdict::Faster)},
                  {"slower", c.count(Verdict::Slower)},
                  {"same", c.count(Verdict::Same)},
                  {"uncertain", c.count(Verdict::Uncertain)}};
  return j;
}

std::string format_comparison(const Comparison& c) {
  std::string s = fmt::format("{:<44} {:>12} {:>12} {:>26} {:>8}  {}\n", "case (new / baseline)", "baseline", "new",
                              fmt::format("ratio [{:g}% CI]", c.options.level * 100), "p", "verdict");
  for (const auto& k : c.cases) {
    const bool have = k.n_a > 0 && k.n_b > 0;
    const std::string ratio = !k.tested ? "-"
                              : k.ratio.available
                                  ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", k.ratio.estimate, k.ratio.lower, k.ratio.upper)
                                  : fmt::format("{:.3f} [no CI]", k.ratio.estimate);
    s += fmt::format("{:<44} {:>12} {:>12} {:>26} {:>8}  {}\n", k.key, have ? format_value(k.median_a, k.unit) : "-",
                     have ? format_value(k.median_b, k.unit) : "-", ratio,
                     k.tested ? fmt::format("{:.2g}", k.test.p_value) : "-", to_string(k.verdict));
    if (k.verdict == Verdict::Uncertain || k.verdict == Verdict::Slower) s += "    " + k.metric + ": " + k.reason + "\n";
  }
  for (const auto& k : c.only_in_a) s += fmt::format("{:<44} only in the baseline\n", k);
  for (const auto& k : c.only_in_b) s += fmt::format("{:<44} only in the new result\n", k);
  s += fmt::format("{} faster, {} slower, {} same, {} uncertain (tolerance ±{:g}%, alpha {:g})\n",
                   c.count(Verdict::Faster), c.count(Verdict::Slower), c.count(Verdict::Same),
                   c.count(Verdict::Uncertain), c.options.tolerance * 100, c.options.alpha);
  return s;
}

}  // namespace d5
