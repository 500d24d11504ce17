// Optimizer base: hyperparameters, learning rate and schedule, state; ThreeStepOptimizer::step.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/train/optimizer.h"
#include "optim_internal.h"

namespace d5 {

Optimizer::Optimizer(Hyperparameters defaults, const Hyperparameters& overrides) : hyper_(std::move(defaults)) {
  for (const auto& [key, value] : overrides) {
    auto it = hyper_.find(key);
    if (it == hyper_.end()) {
      std::vector<std::string> known;
      for (const auto& [k, v] : hyper_) known.push_back(k);
      throw InvalidArgument(fmt::format("unknown hyperparameter '{}' (accepted: {})", key, fmt::join(known, ", ")));
    }
    D5_CHECK_ARG(std::isfinite(value), "hyperparameter '{}' must be a finite number, not {}", key, value);
    it->second = value;
  }
  if (hyper_.count("lr")) D5_CHECK_ARG(hyper_.at("lr") >= 0, "learning rate (lr) must be >= 0, not {}", hyper_.at("lr"));
}

double Optimizer::hyperparameter(const std::string& key) const {
  auto it = hyper_.find(key);
  if (it != hyper_.end()) return it->second;
  std::vector<std::string> known;
  for (const auto& [k, v] : hyper_) known.push_back(k);
  throw InvalidArgument(
      fmt::format("optimizer '{}' has no hyperparameter '{}' (it has: {})", name(), key, fmt::join(known, ", ")));
}

double Optimizer::learning_rate() const { return hyperparameter("lr"); }

void Optimizer::set_learning_rate(double lr) {
  D5_CHECK_ARG(std::isfinite(lr) && lr >= 0, "learning rate must be a finite number >= 0, not {}", lr);
  (void)hyperparameter("lr");
  hyper_["lr"] = lr;
}

double Optimizer::current_learning_rate() const {
  const double base = learning_rate();
  return schedule_ ? schedule_->rate(base, steps_, epoch_) : base;
}

OptimizerState Optimizer::state() const {
  OptimizerState s;
  s["steps"] = optim::scalar_tensor(static_cast<double>(steps_));
  s["epoch"] = optim::scalar_tensor(static_cast<double>(epoch_));
  for (const auto& [k, v] : hyper_) s["hyper/" + k] = optim::scalar_tensor(v);
  return s;
}

void Optimizer::load_state(const OptimizerState& state) {
  steps_ = static_cast<int64_t>(optim::scalar_of(state, "steps", name()));
  epoch_ = static_cast<int64_t>(optim::scalar_of(state, "epoch", name()));
  for (auto& [k, v] : hyper_) {
    auto it = state.find("hyper/" + k);
    if (it != state.end()) v = optim::scalar_of(state, "hyper/" + k, name());
  }
}

TensorMap ThreeStepOptimizer::step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) {
  Network& network = executor.network();
  new_input();
  std::vector<std::pair<std::string, Tensor>> params;
  for (const auto& p : network.get_params()) params.emplace_back(p, network.fetch_tensor(p));
  prepare_all(params);
  TensorMap outputs = executor.inference_and_backprop(feeds, loss);
  run_gradient_hook(network);
  // A parameter the network holds no gradient for is skipped, as torch.optim skips parameters whose
  // .grad is None: neither it nor its state changes. (Executors store a zero gradient for a
  // parameter the loss does not depend on; that one gets the zero-gradient update.)
  std::vector<ParameterUpdate> updates;
  for (const auto& [param, grad_name] : network.gradient()) {
    if (!network.has_value(grad_name)) continue;
    ParameterUpdate u{network.fetch_tensor(grad_name), network.fetch_tensor(param), param};
    D5_CHECK_ARG(u.grad.shape() == u.param.shape(),
                 "optimizer '{}': gradient of '{}' has shape {}, the parameter {}", name(), param,
                 u.grad.shape().to_string(), u.param.shape().to_string());
    updates.push_back(std::move(u));
  }
  update_all(updates);
  count_step();
  return outputs;
}

void ThreeStepOptimizer::prepare_all(std::vector<std::pair<std::string, Tensor>>& params) {
  optim::DeferredChunks one_region;
  for (auto& [name, param] : params) prepare_param(name, param);
  one_region.run();
}

void ThreeStepOptimizer::update_all(std::vector<ParameterUpdate>& updates) {
  optim::DeferredChunks one_region;
  for (auto& u : updates) update_rule(u.grad, u.param, u.name);
  one_region.run();
}

}  // namespace d5
