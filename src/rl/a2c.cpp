// Synchronous advantage actor-critic (agent.h): rollouts of o.rollout steps in every copy, n-step
// returns bootstrapped with the value network, one optimizer step per rollout.
#include <cmath>
#include <limits>
#include <vector>

#include "agent_common.h"
#include "agent_networks.h"

namespace d5::rl {

RlRun train_a2c(const AgentOptions& o, RunTracker& tracker) {
  VectorEnv envs(o.env, o.envs, o.seed);
  const int64_t copies = envs.copies(), actions = envs.actions();
  const int64_t n = o.rollout, rows = copies * n;
  ActorCritic ac(o, envs, rows);
  ActingNetwork& actor = ac.actor();
  RngStream rng(o.seed, "rl/a2c/actions");
  Tensor &obs_t = ac.observations, &weights_t = ac.action_weights, &targets_t = ac.value_targets;
  ac.row_weights.fill(1.0 / static_cast<double>(rows));
  // Rollout storage, [step][copy].
  std::vector<int64_t> act(static_cast<size_t>(rows));
  std::vector<double> reward(static_cast<size_t>(rows)), value(static_cast<size_t>(rows));
  // What follows step t of copy i: 0 after a termination, gamma * V(final observation) after a
  // truncation (filled in then), gamma * (the next step's return) otherwise (marked by NaN).
  std::vector<double> cut(static_cast<size_t>(rows));
  std::vector<int64_t> chosen(static_cast<size_t>(copies));
  int64_t updates = 0;
  bool met = false;
  while (!met && !tracker.done(envs.steps())) {
    for (int64_t t = 0; t < n; ++t) {
      write_rows(obs_t, t * copies, envs.observations());
      const TensorMap& out = actor.run(envs.observations());
      const float* logits = out.at(kLogits).data_as<float>();
      const float* values = out.at(kValue).data_as<float>();
      for (int64_t i = 0; i < copies; ++i) {
        chosen[i] = sample_from_logits({logits + i * actions, static_cast<size_t>(actions)}, rng);
        value[t * copies + i] = values[i];
        act[t * copies + i] = chosen[i];
      }
      const std::vector<EnvStep> res = envs.step(chosen);
      for (int64_t i = 0; i < copies; ++i) {
        const int64_t k = t * copies + i;
        reward[k] = res[i].reward;
        cut[k] = res[i].terminated ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      }
      const std::vector<double> tails = truncated_values(actor, envs, res);
      for (size_t i = 0; i < tails.size(); ++i)
        if (res[i].truncated) cut[t * copies + static_cast<int64_t>(i)] = o.gamma * tails[i];
      met = tracker.record(envs.take_finished()) || met;
    }
    if (met) break;
    const float* bootstrap = actor.run(envs.observations()).at(kValue).data_as<float>();
    weights_t.fill(0);
    for (int64_t i = 0; i < copies; ++i) {
      double ret = bootstrap[i];
      for (int64_t t = n; t-- > 0;) {
        const int64_t k = t * copies + i;
        ret = reward[k] + (std::isnan(cut[k]) ? o.gamma * ret : cut[k]);
        targets_t.data_as<float>()[k] = static_cast<float>(ret);
        weights_t.data_as<float>()[k * actions + act[k]] =
            static_cast<float>((ret - value[k]) / static_cast<double>(rows));
      }
    }
    ac.step();
    ++updates;
  }
  return tracker.finish(envs.steps(), updates);
}

}  // namespace d5::rl
