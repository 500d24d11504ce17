#pragma once
// Level 2: optimizers (docs/optimizers.md).
//
// An Optimizer trains a network through any GraphExecutor: step() runs forward and backward on
// one batch and updates every parameter of executor.network() in place (executors read
// parameters from the network each call, and the TorchExecutor's parameters are views of the
// network's tensors, so in-place updates are seen by every backend without copies).
//
// Two styles, after Deep500:
// - UpdateRuleOptimizer: only update_rule(grad, param, name), applied to each parameter after
//   backprop. Plain SGD, Momentum, Adam, ... are this.
// - ThreeStepOptimizer: new_input() once per step before the forward pass, prepare_param(name)
//   for each parameter before the forward pass (e.g. AcceleGrad evaluates the gradient at a
//   point other than the stored iterate), update_rule afterwards. Level 3's distributed
//   optimizers wrap a ThreeStepOptimizer and communicate between backprop and update_rule.
// Optimizers that need several evaluations per step (L-BFGS) or that live in a framework
// (torch::optim) derive from Optimizer directly.
//
// Hyperparameters are named doubles with torch.optim's defaults; state() / load_state() carry
// everything needed to resume (moment buffers, step counts) for checkpoints.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/net/graph_executor.h"
#include "deep500/core/tensor.h"

namespace d5 {

using Hyperparameters = std::map<std::string, double>;
// Named tensors; scalars are stored as one-element float64 tensors.
using OptimizerState = std::map<std::string, Tensor>;

// A learning-rate schedule: the rate to use at a given step (0-based) and epoch.
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string describe() const = 0;
  virtual double rate(double base_lr, int64_t step, int64_t epoch) const = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // One training step on `feeds`; returns the executor's outputs (including the loss).
  virtual TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) = 0;

  // Called after gradients are computed and before any parameter is updated, with the network
  // holding the gradients (Network::gradient()). Level 3 installs its communication here.
  using GradientHook = std::function<void(Network&)>;
  void set_gradient_hook(GradientHook hook) { gradient_hook_ = std::move(hook); }

  const Hyperparameters& hyperparameters() const { return hyper_; }
  double hyperparameter(const std::string& key) const;  // InvalidArgument naming the known keys
  double learning_rate() const;  // the base rate, before the schedule
  void set_learning_rate(double lr);
  void set_schedule(std::shared_ptr<const LrSchedule> schedule) { schedule_ = std::move(schedule); }
  double current_learning_rate() const;  // the schedule applied at (steps(), epoch())
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t steps() const { return steps_; }

  virtual OptimizerState state() const;
  virtual void load_state(const OptimizerState& state);

 protected:
  // defaults: every key this optimizer accepts with its default; overrides: the user's values,
  // any key not in defaults is an InvalidArgument listing the accepted ones.
  Optimizer(Hyperparameters defaults, const Hyperparameters& overrides);
  void run_gradient_hook(Network& network) {
    if (gradient_hook_) gradient_hook_(network);
  }
  void count_step() { ++steps_; }

  Hyperparameters hyper_;
  int64_t steps_ = 0;
  int64_t epoch_ = 0;

 private:
  GradientHook gradient_hook_;
  std::shared_ptr<const LrSchedule> schedule_;
};

class ThreeStepOptimizer : public Optimizer {
 public:
  TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

  virtual void new_input() {}
  virtual void prepare_param(const std::string& /*name*/, Tensor& /*param*/) {}
  // prepare_param for each (name, parameter), as step() does before the forward pass: on the host
  // in one parallel region, on a device in one launch.
  void prepare_all(std::vector<std::pair<std::string, Tensor>>& params);
  // Updates param in place from its gradient.
  virtual void update_rule(const Tensor& grad, Tensor& param, const std::string& name) = 0;
  // Ends a step driven from outside through the parts above (as step() ends its own): counts it,
  // so that steps() and the learning-rate schedule see it.
  void end_step() { count_step(); }

  // update_rule for each entry in order, as step() does after backprop. The builtin rules' element
  // loops then share one parallel region instead of forking once per parameter.
  struct ParameterUpdate {
    Tensor grad, param;  // param is updated in place (a handle on the network's buffer)
    std::string name;
  };
  // Parameters on a device are updated there (docs/optimizers.md#on-a-device): the step's updates
  // go to the device together, in as few launches as it needs.
  virtual void update_all(std::vector<ParameterUpdate>& updates);

 protected:
  using Optimizer::Optimizer;
};

class UpdateRuleOptimizer : public ThreeStepOptimizer {
 public:
  void new_input() final {}
  void prepare_param(const std::string&, Tensor&) final {}

 protected:
  using ThreeStepOptimizer::ThreeStepOptimizer;
};

// Optimizers register by CLI name ("adam", "torch-adam"); builtin ones are registered with the
// backends (register_builtin_backends). make_optimizer throws InvalidArgument listing the known
// names for an unknown one and Unimplemented when a native optimizer's backend is not built.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const Hyperparameters&)>;
void register_optimizer(const std::string& name, const std::string& description, OptimizerFactory factory);
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Hyperparameters& hyper = {});
std::vector<std::pair<std::string, std::string>> optimizer_names();  // name, description

}  // namespace d5
