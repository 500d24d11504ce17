#pragma once
// Level 2 validation of an optimizer against a twin (docs/optimizers.md): both start from
// identical parameters (two networks from one builder) and fresh state, each steps its own network
// through its own executor of one backend on the same feeds, and every parameter is compared
// after the step(s). At the first step both see bitwise-identical gradients (deterministic
// executors on identical inputs), so the difference is the update rules' alone; later steps add
// what the executor makes of slightly different parameters.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "deep500/net/graph_executor.h"
#include "deep500/train/optimizer.h"

namespace d5 {

using NetworkBuilder = std::function<Network()>;

struct OptimizerComparison {
  std::string optimizer, twin, backend;
  int64_t steps = 0;
  // Per parameter: max_i |a_i - b_i| / max_i |b_i| (b: the twin), a norm-wise relative difference
  // that an element cancelling to ~0 cannot inflate. max_relative_difference is the largest.
  std::map<std::string, double> relative_difference;
  double max_relative_difference = 0;
  std::string worst_parameter;
};

struct OptimizerTestOptions {
  Hyperparameters hyper;  // given to both
  int64_t steps = 1;
  std::string backend = "reference";
  std::string loss = "loss";
};

// InvalidArgument for unknown optimizers/backends or a network without parameters; Unimplemented
// when the twin needs a backend this build lacks.
OptimizerComparison test_optimizer(const std::string& optimizer, const std::string& twin, const NetworkBuilder& build,
                                   const TensorMap& feeds, const OptimizerTestOptions& options = {});

// The norm-wise relative difference above, for one pair of float tensors of one shape.
double relative_difference(const Tensor& actual, const Tensor& expected);

}  // namespace d5
