// DistributedOptimizer: the wrapper's common part (include/deep500/dist/distributed_optimizer.h).
#include "deep500/dist/distributed_optimizer.h"

#include <chrono>

#include "deep500/core/error.h"
#include "deep500/dist/gradient_buckets.h"

namespace d5 {

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm)
    : Optimizer(inner ? inner->hyperparameters() : Hyperparameters{}, {}),
      inner_(std::move(inner)),
      comm_(std::move(comm)) {
  D5_CHECK_ARG(inner_ != nullptr, "a distributed optimizer wraps an optimizer; none was given");
  D5_CHECK_ARG(comm_ != nullptr, "a distributed optimizer needs a communicator; none was given");
}

void DistributedOptimizer::sync_hyperparameters() {
  if (hyper_.count("lr")) inner_->set_learning_rate(hyper_.at("lr"));
  inner_->set_epoch(epoch());
}

TensorMap DistributedOptimizer::step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) {
  const auto t0 = std::chrono::steady_clock::now();
  // Communication includes staging device tensors through the host for the communicator.
  auto communicating = [this] { return comm_->volume().time_s() + comm_->volume().staging().time_s; };
  const double comm0 = communicating();
  if (!started_) {
    // Replicas start from rank 0's parameters.
    for (Tensor& p : parameter_tensors(executor.network())) comm_->broadcast(p, 0);
    started_ = true;
  }
  sync_hyperparameters();
  TensorMap out = distributed_step(executor, feeds, loss);
  count_step();
  times_.step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  times_.communication_s.push_back(communicating() - comm0);
  return out;
}

ThreeStepOptimizer& DistributedOptimizer::three_step() {
  auto* t = dynamic_cast<ThreeStepOptimizer*>(inner_.get());
  D5_CHECK_ARG(t != nullptr,
               "distributed scheme '{}' runs the wrapped optimizer's update rule itself, and '{}' has none (it is "
               "not a three-step optimizer); use dsgd, mavg or dpsgd with it",
               scheme(), inner_->name());
  return *t;
}

void DistributedOptimizer::set_hook(Optimizer::GradientHook hook) {
  inner_->set_gradient_hook([this, hook = std::move(hook)](Network& n) {
    hook_ran_ = true;
    hook(n);
  });
}

TensorMap DistributedOptimizer::inner_step_with_hook(GraphExecutor& executor, const TensorMap& feeds,
                                                     const std::string& loss) {
  hook_ran_ = false;
  TensorMap out = inner_->step(executor, feeds, loss);
  D5_CHECK(hook_ran_, Unimplemented,
           "optimizer '{}' does not expose its gradients before updating (no gradient hook), so scheme '{}' cannot "
           "communicate them; use mavg or dpsgd, which exchange parameters",
           inner_->name(), scheme());
  return out;
}

TensorMap DistributedOptimizer::forward_backward(GraphExecutor& executor, const TensorMap& feeds,
                                                 const std::string& loss) {
  prepare_three_step(three_step(), executor.network());
  return executor.inference_and_backprop(feeds, loss);
}

void prepare_three_step(ThreeStepOptimizer& optimizer, Network& network) {
  optimizer.new_input();
  std::vector<std::pair<std::string, Tensor>> params;
  for (const auto& p : network.get_params()) params.emplace_back(p, network.fetch_tensor(p));
  optimizer.prepare_all(params);
}

void apply_update_rules(ThreeStepOptimizer& optimizer, Network& network) {
  std::vector<ThreeStepOptimizer::ParameterUpdate> updates;
  for (const auto& [param, grad_name] : network.gradient())
    if (network.has_value(grad_name)) updates.push_back({network.fetch_tensor(grad_name), network.fetch_tensor(param), param});
  optimizer.update_all(updates);
}

}  // namespace d5
