#pragma once
// Level 3: distributed optimizers (docs/distributed-optimizers.md).
//
// A DistributedOptimizer wraps any Level-2 optimizer and a Communicator. Each rank trains its own
// replica of the network on its own batches (a DistributedSampler); the wrapper decides what the
// ranks exchange and when: gradients before the update (DSGD, parameter server, bounded
// staleness, sparse), or parameters after it (model averaging, decentralized neighbours).
//
// Before the first step every scheme broadcasts rank 0's parameters, so replicas start equal
// whatever their initialization. Each step records the time spent communicating (the
// communicator's clock) and computing (the rest), per step, for load-imbalance metrics.
//
// The wrapped optimizer keeps its own hyperparameters and state; the wrapper forwards its
// learning rate and epoch before every step, and state() / load_state() are the wrapped one's.
// An LR schedule is set on the wrapped optimizer before wrapping.
#include <memory>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/train/optimizer.h"

namespace d5 {

struct DistributedStepTimes {
  std::vector<double> step_s;           // whole step
  std::vector<double> communication_s;  // inside the communicator during the step
};

class DistributedOptimizer : public Optimizer {
 public:
  std::string name() const override { return scheme() + "(" + inner_->name() + ")"; }
  // The scheme's CLI name: dsgd, pssgd, ssgd, mavg, dpsgd, sparse, ...
  virtual std::string scheme() const = 0;

  TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) final;
  // Completes outstanding communication (a bounded-staleness pipeline's last gradients) so that
  // the parameters are final; the trainer's end. A no-op for synchronous schemes.
  virtual void finish(Network& /*network*/) {}

  OptimizerState state() const override { return inner_->state(); }
  void load_state(const OptimizerState& state) override { inner_->load_state(state); }

  Optimizer& inner() { return *inner_; }
  const DistributedStepTimes& times() const { return times_; }

 protected:
  DistributedOptimizer(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm);
  virtual TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) = 0;
  // The wrapped optimizer as a three-step one, for schemes that run its update themselves;
  // InvalidArgument naming the scheme when it is not (L-BFGS, torch::optim).
  ThreeStepOptimizer& three_step();
  // Runs the wrapped optimizer's step and checks that it exposed its gradients to the hook.
  TensorMap inner_step_with_hook(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss);
  void set_hook(Optimizer::GradientHook hook);
  // The three-step optimizer's part before the update: new_input, prepare_param, forward and
  // backward. The gradients are then in the network.
  TensorMap forward_backward(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss);
  void count_inner_step() { three_step().end_step(); }

  std::unique_ptr<Optimizer> inner_;
  std::shared_ptr<Communicator> comm_;

 private:
  void sync_hyperparameters();
  bool started_ = false;
  bool hook_ran_ = false;
  DistributedStepTimes times_;
};

// Applies update_rule to every parameter with a gradient, as ThreeStepOptimizer::step does
// after backprop (the part the schemes that move gradients themselves reuse).
void apply_update_rules(ThreeStepOptimizer& optimizer, Network& network);
// prepare_param for every parameter and new_input, the part before the forward pass.
void prepare_three_step(ThreeStepOptimizer& optimizer, Network& network);

}  // namespace d5
