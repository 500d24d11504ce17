// The serial oracle of the distributed schemes (serial_schemes.h). Each scheme is restated here
// from its documentation, in the most direct form rather than the library's: ssgd as "the update
// of step t uses the mean gradient of step t - s", not as a queue of requests; top-k as a full
// sort, not a partial selection.
#include "serial_schemes.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

namespace d5::test {

void SerialSgd::apply(Flat& params, const Flat& gradient) {
  const bool first = velocity_.empty();
  if (first) velocity_.assign(params.size(), 0.f);
  const auto neg_lr = static_cast<float>(-rule_.lr), mu = static_cast<float>(rule_.momentum);
  for (size_t i = 0; i < params.size(); ++i) {
    float d = gradient[i];
    if (mu != 0) {
      velocity_[i] = first ? d : velocity_[i] * mu + d;
      d = velocity_[i];
    }
    params[i] = std::fma(d, neg_lr, params[i]);
  }
}

namespace {

// The element-wise mean of several vectors, summed in double.
Flat mean_of(const std::vector<Flat>& vs) {
  std::vector<double> sum(vs.front().size(), 0.0);
  for (const Flat& v : vs)
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
  Flat out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out[i] = static_cast<float>(sum[i] / static_cast<double>(vs.size()));
  return out;
}

// Every rank's gradient at step t, each at the parameters that rank holds.
Flat mean_gradient(int ranks, int64_t t, const std::vector<Flat>& at, const GradientAt& gradient) {
  std::vector<Flat> g;
  for (int r = 0; r < ranks; ++r) g.push_back(gradient(r, t, at[static_cast<size_t>(r)]));
  return mean_of(g);
}

// dsgd and pssgd: one shared model, updated with the mean of the ranks' gradients at it.
SerialOutcome synchronous(int ranks, int64_t steps, const Flat& initial, const SgdRule& rule,
                          const GradientAt& gradient) {
  Flat x = initial;
  SerialSgd opt(rule);
  for (int64_t t = 0; t < steps; ++t) opt.apply(x, mean_gradient(ranks, t, std::vector<Flat>(ranks, x), gradient));
  return {std::vector<Flat>(static_cast<size_t>(ranks), x), 0};
}

// ssgd: step t computes the mean gradient at the current (shared) model and applies the one of
// step t - s; the first s steps apply nothing, and the end applies the last s in step order.
SerialOutcome stale(int ranks, int64_t steps, int64_t s, const Flat& initial, const SgdRule& rule,
                    const GradientAt& gradient) {
  Flat x = initial;
  SerialSgd opt(rule);
  std::vector<Flat> mean(static_cast<size_t>(steps));
  for (int64_t t = 0; t < steps; ++t) {
    mean[static_cast<size_t>(t)] = mean_gradient(ranks, t, std::vector<Flat>(ranks, x), gradient);
    if (t - s >= 0) opt.apply(x, mean[static_cast<size_t>(t - s)]);
  }
  for (int64_t u = std::max<int64_t>(0, steps - s); u < steps; ++u) opt.apply(x, mean[static_cast<size_t>(u)]);
  return {std::vector<Flat>(static_cast<size_t>(ranks), x), 0};
}

// Every rank takes step t alone, on its own model with its own optimizer state.
void local_steps(std::vector<Flat>& xs, std::vector<SerialSgd>& opts, int64_t t, const GradientAt& gradient) {
  for (size_t r = 0; r < xs.size(); ++r) opts[r].apply(xs[r], gradient(static_cast<int>(r), t, xs[r]));
}

// mavg: every rank steps alone with its own optimizer state; after every k-th step, and at the
// end when steps remain since the last average, every rank takes the mean of all models. The
// optimizer states are not averaged.
SerialOutcome model_average(int ranks, int64_t steps, int64_t k, const Flat& initial, const SgdRule& rule,
                            const GradientAt& gradient) {
  std::vector<Flat> xs(static_cast<size_t>(ranks), initial);
  std::vector<SerialSgd> opts(static_cast<size_t>(ranks), SerialSgd(rule));
  for (int64_t t = 0; t < steps; ++t) {
    local_steps(xs, opts, t, gradient);
    if ((t + 1) % k == 0) xs.assign(static_cast<size_t>(ranks), mean_of(xs));
  }
  if (steps % k != 0) xs.assign(static_cast<size_t>(ranks), mean_of(xs));
  return {xs, 0};
}

// dpsgd: a local step on every rank, then rank r's model becomes the mean of its own and those of
// its ring neighbours r - 1 and r + 1 (mod N), each counted once.
SerialOutcome neighbours(int ranks, int64_t steps, const Flat& initial, const SgdRule& rule,
                         const GradientAt& gradient) {
  std::vector<Flat> xs(static_cast<size_t>(ranks), initial);
  std::vector<SerialSgd> opts(static_cast<size_t>(ranks), SerialSgd(rule));
  for (int64_t t = 0; t < steps; ++t) {
    local_steps(xs, opts, t, gradient);
    std::vector<Flat> mixed;
    for (int r = 0; r < ranks; ++r) {
      const std::set<int> group = {r, (r + ranks - 1) % ranks, (r + 1) % ranks};
      std::vector<Flat> models;
      for (int m : group) models.push_back(xs[static_cast<size_t>(m)]);
      mixed.push_back(mean_of(models));
    }
    xs = mixed;
  }
  return {xs, 0};
}

// The indices of the k largest |v|, ties to the lower index.
std::vector<size_t> top_k(const Flat& v, size_t k) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&v](size_t a, size_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  order.resize(k);
  return order;
}

// sparse: rank r adds its residual to its gradient, contributes the k largest magnitudes of the
// sum and keeps the rest as its residual; the update uses the mean over ranks of the contributions
// (zero where a rank sent nothing). The exchange goes dense when N k (index, value) pairs of 12
// bytes would take at least the 4 bytes per element of the dense vector, which changes the bytes,
// not the values.
SerialOutcome sparse(int ranks, int64_t steps, double fraction, const Flat& initial, const SgdRule& rule,
                     const GradientAt& gradient) {
  Flat x = initial;
  SerialSgd opt(rule);
  const size_t n = x.size();
  const auto k = static_cast<size_t>(
      std::clamp<double>(std::ceil(fraction * static_cast<double>(n)), 1.0, static_cast<double>(n)));
  std::vector<Flat> residual(static_cast<size_t>(ranks), Flat(n, 0.f));
  SerialOutcome out;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Flat> sent;
    for (int r = 0; r < ranks; ++r) {
      Flat acc = gradient(r, t, x);
      Flat& res = residual[static_cast<size_t>(r)];
      for (size_t i = 0; i < n; ++i) acc[i] += res[i];
      Flat mine(n, 0.f);
      res = acc;
      for (size_t i : top_k(acc, k)) {
        mine[i] = acc[i];
        res[i] = 0.f;
      }
      sent.push_back(std::move(mine));
    }
    if (static_cast<double>(ranks) * static_cast<double>(k) * 12 >= static_cast<double>(n) * 4) ++out.dense_steps;
    opt.apply(x, mean_of(sent));
  }
  out.params.assign(static_cast<size_t>(ranks), x);
  return out;
}

// asgd served in rank order: rank 0 holds the model and the only optimizer state. In its step t
// it applies its own gradient (at the model as it is), then, for workers 1, ..., N - 1 in turn,
// the gradient that worker computed at the model it last received, and sends it the model as it
// is then. The end gives every rank the server's model.
SerialOutcome parameter_server(int ranks, int64_t steps, const Flat& initial, const SgdRule& rule,
                               const GradientAt& gradient) {
  Flat server = initial;
  std::vector<Flat> received(static_cast<size_t>(ranks), initial);
  SerialSgd opt(rule);
  for (int64_t t = 0; t < steps; ++t) {
    opt.apply(server, gradient(0, t, server));
    for (int w = 1; w < ranks; ++w) {
      opt.apply(server, gradient(w, t, received[static_cast<size_t>(w)]));
      received[static_cast<size_t>(w)] = server;
    }
  }
  return {std::vector<Flat>(static_cast<size_t>(ranks), server), 0};
}

}  // namespace

SerialOutcome simulate_scheme(const SchemeSpec& spec, int ranks, int64_t steps, const Flat& initial,
                              const SgdRule& rule, const GradientAt& gradient) {
  const std::string& s = spec.scheme;
  if (s == "dsgd" || s == "pssgd") return synchronous(ranks, steps, initial, rule, gradient);
  if (s == "ssgd") return stale(ranks, steps, spec.staleness, initial, rule, gradient);
  if (s == "mavg") return model_average(ranks, steps, spec.average_every, initial, rule, gradient);
  if (s == "dpsgd") return neighbours(ranks, steps, initial, rule, gradient);
  if (s == "sparse") return sparse(ranks, steps, spec.topk, initial, rule, gradient);
  if (s == "asgd") return parameter_server(ranks, steps, initial, rule, gradient);
  throw std::invalid_argument("no serial simulation of scheme '" + s + "'");
}

double worst_relative_difference(const Flat& got, const Flat& want, double floor) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, d / std::max<double>(std::fabs(want[i]), floor));
  }
  return worst;
}

}  // namespace d5::test
