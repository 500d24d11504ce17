#include "deep500/train/optimizer_validation.h"

#include <cmath>

#include "deep500/core/error.h"

namespace d5 {

double relative_difference(const Tensor& actual, const Tensor& expected) {
  D5_CHECK_ARG(actual.shape() == expected.shape(), "relative_difference: shapes {} and {} differ",
               actual.shape().to_string(), expected.shape().to_string());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.get(i), b = expected.get(i);
    if (std::isnan(a) != std::isnan(b)) return INFINITY;
    diff = std::max(diff, std::abs(a - b));
    scale = std::max(scale, std::abs(b));
  }
  if (diff == 0) return 0;
  return scale > 0 ? diff / scale : INFINITY;
}

OptimizerComparison test_optimizer(const std::string& optimizer, const std::string& twin, const NetworkBuilder& build,
                                   const TensorMap& feeds, const OptimizerTestOptions& o) {
  D5_CHECK_ARG(o.steps >= 1, "test_optimizer: steps must be >= 1, not {}", o.steps);
  auto opt_a = make_optimizer(optimizer, o.hyper);
  auto opt_b = make_optimizer(twin, o.hyper);
  Network net_a = build(), net_b = build();
  D5_CHECK_ARG(!net_a.get_params().empty(), "test_optimizer: network '{}' has no parameters", net_a.name());
  ExecutorOptions eo;
  eo.deterministic = true;
  auto exec_a = make_executor(net_a, o.backend, eo);
  auto exec_b = make_executor(net_b, o.backend, eo);
  for (int64_t s = 0; s < o.steps; ++s) {
    opt_a->step(*exec_a, feeds, o.loss);
    opt_b->step(*exec_b, feeds, o.loss);
  }
  OptimizerComparison c;
  c.optimizer = optimizer;
  c.twin = twin;
  c.backend = o.backend;
  c.steps = o.steps;
  for (const auto& p : net_a.get_params()) {
    const double d = relative_difference(net_a.fetch_tensor(p), net_b.fetch_tensor(p));
    c.relative_difference[p] = d;
    if (c.worst_parameter.empty() || d > c.max_relative_difference) {
      c.max_relative_difference = d;
      c.worst_parameter = p;
    }
  }
  return c;
}

}  // namespace d5
