#include "agent_common.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "agent_networks.h"
#include "deep500/core/error.h"
#include "deep500/metrics/timer.h"

namespace d5::rl {

void write_rows(Tensor& dst, int64_t row, std::span<const double> values) {
  const int64_t width = dst.shape()[1];
  D5_CHECK(static_cast<int64_t>(values.size()) % width == 0 &&
               row * width + static_cast<int64_t>(values.size()) <= dst.numel(),
           Internal, "write_rows: {} values at row {} of {}", values.size(), row, dst.desc().to_string());
  float* out = dst.data_as<float>() + row * width;
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
}

ActingNetwork::ActingNetwork(Network network, const std::string& backend) : net_(std::move(network)) {
  executor_ = make_executor(net_, backend);
  input_ = Tensor(net_.desc(kObservation));
}

const TensorMap& ActingNetwork::run(std::span<const double> observations) {
  write_rows(input_, 0, observations);
  outputs_ = executor_->inference({{kObservation, input_}});
  return outputs_;
}

std::vector<double> truncated_values(ActingNetwork& actor, const VectorEnv& envs, const std::vector<EnvStep>& steps) {
  const auto width = static_cast<size_t>(envs.observation_size());
  std::vector<double> finals;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].truncated) continue;
    if (finals.empty()) finals = envs.observations();
    const auto fin = envs.final_observation(static_cast<int64_t>(i));
    std::copy(fin.begin(), fin.end(), finals.begin() + static_cast<std::ptrdiff_t>(i * width));
  }
  if (finals.empty()) return {};
  const float* v = actor.run(finals).at(kValue).data_as<float>();
  std::vector<double> out(steps.size(), std::numeric_limits<double>::quiet_NaN());
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].truncated) out[i] = v[i];
  return out;
}

int64_t sample_from_logits(std::span<const float> logits, RngStream& rng) {
  const float top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(static_cast<double>(logits[i] - top));
  double u = rng.uniform() * total;
  for (size_t i = 0; i < p.size(); ++i) {
    if (u < p[i]) return static_cast<int64_t>(i);
    u -= p[i];
  }
  return static_cast<int64_t>(p.size()) - 1;  // u landed on the rounding remainder
}

int64_t argmax(std::span<const float> values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}

RunTracker::RunTracker(const AgentOptions& o, const Environment& env,
                       const std::function<void(const RlProgress&)>& on_episode)
    : target_(o.target),
      window_(o.window),
      max_env_steps_(o.max_env_steps),
      start_ns_(wall_now_ns()),
      on_episode_(on_episode) {
  if (std::isnan(target_.threshold)) {
    target_.measure = "return";
    target_.comparison = QualityTarget::Comparison::at_least;
    target_.threshold = env.reward_threshold();
  }
  run_.best_mean_return = -std::numeric_limits<double>::infinity();
}

bool RunTracker::record(const std::vector<Episode>& episodes) {
  const double now = static_cast<double>(wall_now_ns() - start_ns_) * 1e-9;
  for (const Episode& e : episodes) {
    recent_.push_back(e.episode_return);
    recent_sum_ += e.episode_return;
    if (static_cast<int64_t>(recent_.size()) > window_) {
      recent_sum_ -= recent_.front();
      recent_.pop_front();
    }
    RlProgress p;
    p.env_steps = e.end_step;
    p.seconds = now;
    p.episodes = static_cast<int64_t>(run_.curve.size()) + 1;
    p.episode_return = e.episode_return;
    p.mean_return = recent_sum_ / static_cast<double>(recent_.size());
    run_.curve.push_back(p);
    if (on_episode_) on_episode_(p);
    const bool full = static_cast<int64_t>(recent_.size()) == window_;
    if (full) run_.best_mean_return = std::max(run_.best_mean_return, p.mean_return);
    if (full && !run_.reached && target_.met_by(p.mean_return)) {
      run_.reached = true;
      run_.env_steps_to_target = p.env_steps;
      run_.time_to_target_s = now;
      run_.episodes_to_target = p.episodes;
      return true;
    }
  }
  return run_.reached;
}

RlRun RunTracker::finish(int64_t env_steps, int64_t updates) {
  RlRun r = run_;
  r.env_steps = env_steps;
  r.updates = updates;
  r.seconds = static_cast<double>(wall_now_ns() - start_ns_) * 1e-9;
  r.target = target_.to_string();
  if (!std::isfinite(r.best_mean_return)) r.best_mean_return = std::numeric_limits<double>::quiet_NaN();
  r.stop_reason = r.reached ? fmt::format("target {} met", target_.to_string())
                            : fmt::format("max_env_steps {} reached before {}", max_env_steps_, target_.to_string());
  return r;
}

std::unique_ptr<GraphExecutor> training_executor(Network& net, const AgentOptions& o) {
  return make_executor(net, o.backend);
}

std::unique_ptr<Optimizer> agent_optimizer(const AgentOptions& o) { return make_optimizer(o.optimizer, o.hyper); }

ActorCritic::ActorCritic(const AgentOptions& o, const VectorEnv& envs, int64_t rows) {
  NetShape shape{envs.observation_size(), envs.actions(), o.hidden, rows, o.seed};
  train_ = build_actor_critic(shape, true, o.value_coef, o.entropy_coef);
  shape.batch = envs.copies();
  Network act = build_actor_critic(shape, false);
  share_parameters(train_, act);
  actor_ = std::make_unique<ActingNetwork>(std::move(act), o.backend);
  executor_ = training_executor(train_, o);
  optimizer_ = agent_optimizer(o);
  observations = Tensor(train_.desc(kObservation));
  action_weights = Tensor(train_.desc(kActionWeights));
  row_weights = Tensor(train_.desc(kRowWeights));
  value_targets = Tensor(train_.desc(kValueTargets));
}

void ActorCritic::step() {
  optimizer_->step(*executor_,
                   {{kObservation, observations}, {kActionWeights, action_weights}, {kRowWeights, row_weights},
                    {kValueTargets, value_targets}},
                   kLoss);
}

}  // namespace d5::rl
