// Deep Q-learning (agent.h): epsilon-greedy acting from the online network, a replay buffer of the
// last o.buffer transitions, one update of o.batch sampled transitions every o.train_every
// environment steps, the target network refreshed every o.target_every environment steps.
#include <algorithm>
#include <vector>

#include "agent_common.h"
#include "agent_networks.h"

namespace d5::rl {

namespace {

// Transitions in a ring. A truncated transition keeps the final observation as its next one and
// is not terminal: the target bootstraps through the time limit.
class ReplayBuffer {
 public:
  ReplayBuffer(int64_t capacity, int64_t width) : capacity_(capacity), width_(width) {
    obs_.resize(static_cast<size_t>(capacity * width));
    next_.resize(obs_.size());
    action_.resize(static_cast<size_t>(capacity));
    reward_.resize(action_.size());
    terminal_.resize(action_.size());
  }
  void add(std::span<const double> obs, int64_t action, double reward, std::span<const double> next, bool terminal) {
    const int64_t k = head_;
    std::copy(obs.begin(), obs.end(), obs_.begin() + k * width_);
    std::copy(next.begin(), next.end(), next_.begin() + k * width_);
    action_[k] = action;
    reward_[k] = reward;
    terminal_[k] = terminal;
    head_ = (head_ + 1) % capacity_;
    size_ = std::min(size_ + 1, capacity_);
  }
  int64_t size() const { return size_; }
  std::span<const double> obs(int64_t k) const { return {obs_.data() + k * width_, static_cast<size_t>(width_)}; }
  std::span<const double> next(int64_t k) const { return {next_.data() + k * width_, static_cast<size_t>(width_)}; }
  int64_t action(int64_t k) const { return action_[k]; }
  double reward(int64_t k) const { return reward_[k]; }
  bool terminal(int64_t k) const { return terminal_[k]; }

 private:
  int64_t capacity_, width_, head_ = 0, size_ = 0;
  std::vector<double> obs_, next_, reward_;
  std::vector<int64_t> action_;
  std::vector<bool> terminal_;
};

}  // namespace

RlRun train_dqn(const AgentOptions& o, RunTracker& tracker) {
  VectorEnv envs(o.env, o.envs, o.seed);
  const int64_t copies = envs.copies(), width = envs.observation_size(), actions = envs.actions();
  NetShape shape{width, actions, o.hidden, o.batch, o.seed};
  Network train_net = build_q_network(shape, true);
  Network target_net = build_q_network(shape, false);
  ActingNetwork target(std::move(target_net), o.backend);
  copy_parameters(train_net, target.network());
  shape.batch = copies;
  Network act_net = build_q_network(shape, false);
  share_parameters(train_net, act_net);
  ActingNetwork actor(std::move(act_net), o.backend);
  auto executor = training_executor(train_net, o);
  auto optimizer = agent_optimizer(o);
  RngStream explore(o.seed, "rl/dqn/explore"), replay_rng(o.seed, "rl/dqn/replay");

  ReplayBuffer buffer(o.buffer, width);
  Tensor obs_t(train_net.desc(kObservation)), weights_t(train_net.desc(kActionWeights));
  Tensor targets_t(train_net.desc(kQTargets));
  std::vector<double> next_obs(static_cast<size_t>(o.batch * width));
  std::vector<int64_t> sample(static_cast<size_t>(o.batch)), chosen(static_cast<size_t>(copies));
  const double anneal_steps = std::max(1.0, o.epsilon_fraction * static_cast<double>(o.max_env_steps));
  int64_t updates = 0, due_updates = 0, since_target = 0;
  bool met = false;
  while (!met && !tracker.done(envs.steps())) {
    const double progress = std::min(1.0, static_cast<double>(envs.steps()) / anneal_steps);
    const double epsilon = o.epsilon_start + progress * (o.epsilon_end - o.epsilon_start);
    const float* q = actor.run(envs.observations()).at(kLogits).data_as<float>();
    for (int64_t i = 0; i < copies; ++i)
      chosen[i] = explore.uniform() < epsilon ? static_cast<int64_t>(explore.below(static_cast<uint64_t>(actions)))
                                              : argmax({q + i * actions, static_cast<size_t>(actions)});
    const std::vector<double> before = envs.observations();
    const std::vector<EnvStep>& res = envs.step(chosen);
    for (int64_t i = 0; i < copies; ++i) {
      const bool ended = res[i].terminated || res[i].truncated;
      const std::span<const double> next =
          ended ? envs.final_observation(i)
                : std::span<const double>(envs.observations()).subspan(static_cast<size_t>(i * width), width);
      buffer.add({before.data() + i * width, static_cast<size_t>(width)}, chosen[i], res[i].reward, next,
                 res[i].terminated);
    }
    met = tracker.record(envs.take_finished());
    if (met) break;
    since_target += copies;
    if (envs.steps() < o.learning_starts) continue;
    due_updates += copies;
    for (; due_updates >= o.train_every; due_updates -= o.train_every) {
      for (auto& k : sample) k = static_cast<int64_t>(replay_rng.below(static_cast<uint64_t>(buffer.size())));
      for (int64_t b = 0; b < o.batch; ++b) {
        write_rows(obs_t, b, buffer.obs(sample[b]));
        const auto nx = buffer.next(sample[b]);
        std::copy(nx.begin(), nx.end(), next_obs.begin() + b * width);
      }
      const float* q_next = target.run(next_obs).at(kLogits).data_as<float>();
      weights_t.fill(0);
      targets_t.fill(0);
      for (int64_t b = 0; b < o.batch; ++b) {
        const int64_t k = sample[b];
        const double best = *std::max_element(q_next + b * actions, q_next + (b + 1) * actions);
        const double y = buffer.reward(k) + (buffer.terminal(k) ? 0.0 : o.gamma * best);
        targets_t.data_as<float>()[b * actions + buffer.action(k)] = static_cast<float>(y);
        weights_t.data_as<float>()[b * actions + buffer.action(k)] = static_cast<float>(1.0 / static_cast<double>(o.batch));
      }
      optimizer->step(*executor, {{kObservation, obs_t}, {kActionWeights, weights_t}, {kQTargets, targets_t}}, kLoss);
      ++updates;
    }
    if (since_target >= o.target_every) {
      copy_parameters(train_net, target.network());
      since_target = 0;
    }
  }
  return tracker.finish(envs.steps(), updates);
}

}  // namespace d5::rl
