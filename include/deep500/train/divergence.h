#pragma once
// Trajectory divergence (docs/divergence.md; Deep500 paper, Fig. 11): two optimizers, typically a
// reference one and its native twin, train two copies of one network from identical initial
// parameters on identical batches; after every step the l2 and l_inf norms of the difference of
// every parameter say how far the trajectories have drifted apart.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/optimizer_validation.h"

namespace d5 {

struct ParameterDivergence {
  double l2 = 0, linf = 0;
};

struct DivergenceStep {
  int64_t step = 0;  // 1-based: after this many steps
  double loss_a = 0, loss_b = 0;  // the loss each optimizer's step computed (before its update)
  ParameterDivergence total;      // over all parameters as one vector
  std::map<std::string, ParameterDivergence> params;
};

struct DivergenceReport {
  std::string optimizer, twin, backend;
  int64_t parameters = 0;  // elements
  std::vector<DivergenceStep> steps;
};

struct DivergenceOptions {
  std::string optimizer = "adam", twin = "torch-adam";
  Hyperparameters hyper;  // given to both
  std::shared_ptr<const LrSchedule> schedule;  // set on both when given
  int64_t steps = 10;
  std::string backend = "reference";
  std::string loss = "loss";
};

// The batch for a step (0-based): every graph input of the network.
using BatchSource = std::function<TensorMap(int64_t step)>;

DivergenceReport trajectory_divergence(const NetworkBuilder& build, const BatchSource& batches,
                                       const DivergenceOptions& options);

// Seeded batches for the network's graph inputs, the same for every call with the same seed:
// floating-point inputs N(0, 1), integer inputs (labels) uniform in [0, classes).
BatchSource random_batches(const Network& network, uint64_t seed, int64_t classes);

// Consecutive batches of a dataset: step s reads samples s*batch .. s*batch+batch-1 (modulo its
// size), so both optimizers and every rerun see the same data.
BatchSource dataset_batches(std::shared_ptr<const Dataset> dataset, int64_t batch);

}  // namespace d5
