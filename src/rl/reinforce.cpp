// REINFORCE with a learned baseline (agent.h). One update per round: every environment copy plays
// exactly one episode (copies that finished wait), then one optimizer step on all of them.
#include <cmath>

#include "agent_common.h"
#include "agent_networks.h"

namespace d5::rl {

namespace {

struct Step {
  std::vector<double> obs;
  int64_t action = 0;
  double reward = 0;
  double value = 0;  // V(s) when the action was taken
};

// The discounted return of every step of one episode; a truncated episode's tail is the value of
// its last observation (the episode did not end there).
std::vector<double> returns_of(const std::vector<Step>& steps, double gamma, double tail) {
  std::vector<double> g(steps.size());
  double running = tail;
  for (size_t t = steps.size(); t-- > 0;) g[t] = running = steps[t].reward + gamma * running;
  return g;
}

}  // namespace

RlRun train_reinforce(const AgentOptions& o, RunTracker& tracker) {
  VectorEnv envs(o.env, o.envs, o.seed);
  const int64_t copies = envs.copies(), width = envs.observation_size(), actions = envs.actions();
  const int64_t horizon = envs.environment().max_episode_steps();
  ActorCritic ac(o, envs, copies * horizon);
  ActingNetwork& actor = ac.actor();
  RngStream rng(o.seed, "rl/reinforce/actions");
  Tensor &obs_t = ac.observations, &weights_t = ac.action_weights, &row_t = ac.row_weights,
         &targets_t = ac.value_targets;
  int64_t updates = 0;
  std::vector<int64_t> chosen(static_cast<size_t>(copies));
  while (!tracker.done(envs.steps())) {
    std::vector<std::vector<Step>> episodes(static_cast<size_t>(copies));
    std::vector<double> tails(static_cast<size_t>(copies), 0.0);
    std::vector<bool> playing(static_cast<size_t>(copies), true);
    int64_t still = copies;
    bool met = false;
    while (still > 0 && !met) {
      const TensorMap& out = actor.run(envs.observations());
      const float* logits = out.at(kLogits).data_as<float>();
      const float* values = out.at(kValue).data_as<float>();
      const std::vector<double> before = envs.observations();
      for (int64_t i = 0; i < copies; ++i)
        chosen[i] = playing[i] ? sample_from_logits({logits + i * actions, static_cast<size_t>(actions)}, rng) : -1;
      const std::vector<EnvStep>& res = envs.step(chosen);
      for (int64_t i = 0; i < copies; ++i) {
        if (!playing[i]) continue;
        episodes[i].push_back({{before.begin() + i * width, before.begin() + (i + 1) * width}, chosen[i],
                               res[i].reward, static_cast<double>(values[i])});
        if (!res[i].terminated && !res[i].truncated) continue;
        playing[i] = false;
        --still;
      }
      // Bootstrapped through the time limit (after the loop: the pass replaces what `values` reads).
      const std::vector<double> cut = truncated_values(actor, envs, res);
      for (size_t i = 0; i < cut.size(); ++i)
        if (res[i].truncated) tails[i] = cut[i];
      met = tracker.record(envs.take_finished()) || met;
    }
    if (met) break;
    // The batch: every played step, advantages G_t - V(s_t), optionally standardized.
    obs_t.fill(0);
    weights_t.fill(0);
    row_t.fill(0);
    targets_t.fill(0);
    std::vector<double> advantages;
    std::vector<int64_t> row_of;
    int64_t row = 0;
    for (int64_t i = 0; i < copies; ++i) {
      const std::vector<double> g = returns_of(episodes[i], o.gamma, tails[i]);
      for (size_t t = 0; t < episodes[i].size(); ++t, ++row) {
        const Step& s = episodes[i][t];
        write_rows(obs_t, row, s.obs);
        targets_t.data_as<float>()[row] = static_cast<float>(g[t]);
        advantages.push_back(g[t] - s.value);
        row_of.push_back(row * actions + s.action);
      }
    }
    const double n = static_cast<double>(row);
    double scale = 1.0, shift = 0.0;
    if (o.normalize_advantages && row > 1) {
      double mean = 0, var = 0;
      for (double a : advantages) mean += a;
      mean /= n;
      for (double a : advantages) var += (a - mean) * (a - mean);
      shift = mean;
      scale = 1.0 / (std::sqrt(var / n) + 1e-8);
    }
    for (size_t k = 0; k < advantages.size(); ++k) {
      weights_t.data_as<float>()[row_of[k]] = static_cast<float>((advantages[k] - shift) * scale / n);
      row_t.data_as<float>()[row_of[k] / actions] = static_cast<float>(1.0 / n);
    }
    ac.step();
    ++updates;
  }
  return tracker.finish(envs.steps(), updates);
}

}  // namespace d5::rl
