#pragma once
// Level 2, reinforcement learning: agents trained on d5 networks with d5 optimizers through any
// graph executor (docs/rl.md).
//
// - reinforce: REINFORCE with a learned baseline (Williams 1992). Each update plays one whole
//   episode in every environment copy, computes discounted returns G_t, and descends
//   -sum log pi(a_t|s_t) (G_t - V(s_t)) / n + value_coef sum (V(s_t) - G_t)^2 / n over the n steps
//   played; the batch is padded to copies x max_episode_steps with zero weights, so the networks'
//   shapes never change.
// - a2c: synchronous advantage actor-critic (Mnih et al. 2016): rollouts of `rollout` steps in
//   every copy, n-step returns bootstrapped with V (through truncations, never through
//   terminations), an entropy bonus.
// - dqn: deep Q-learning (Mnih et al. 2015) with a replay buffer, a target network copied every
//   `target_every` environment steps, epsilon-greedy exploration annealed linearly, Huber loss on
//   the taken action's TD error.
//
// The quality measure is the mean return over the last `window` finished episodes (100: Gym's
// "solved" criterion). Training stops when the target is met (the environment steps and wall
// time until then are the time to target) or after max_env_steps.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "deep500/rl/environment.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/quality_target.h"

namespace d5 {

struct AgentOptions {
  std::string env = "cartpole";
  std::string agent = "reinforce";
  std::string backend = "reference";  // the graph executor
  std::string optimizer = "adam";
  Hyperparameters hyper;               // the optimizer's (lr, ...), its defaults otherwise
  int64_t envs = 8;                    // environment copies stepped together
  int64_t hidden = 64;                 // units of each of the two hidden layers
  double gamma = 0.99;
  int64_t max_env_steps = 500000;
  // measure "return"; the default (threshold NaN) is the environment's own "solved" threshold
  QualityTarget target{"return", QualityTarget::Comparison::at_least, std::numeric_limits<double>::quiet_NaN()};
  int64_t window = 100;                // episodes the mean return is taken over
  uint64_t seed = 1;
  // reinforce, a2c
  double value_coef = 0.5;
  double entropy_coef = 0.0;
  int64_t rollout = 5;                 // a2c: steps per copy per update
  bool normalize_advantages = true;    // reinforce: advantages scaled to unit variance per update
  // dqn
  int64_t batch = 64;
  int64_t buffer = 50000;
  int64_t learning_starts = 1000;      // environment steps before the first update
  int64_t train_every = 4;             // environment steps per update (over all copies)
  int64_t target_every = 500;          // environment steps between target-network copies
  double epsilon_start = 1.0, epsilon_end = 0.05;
  double epsilon_fraction = 0.2;       // of max_env_steps over which epsilon anneals
};

// One point of the learning curve: after each finished episode.
struct RlProgress {
  int64_t env_steps = 0;
  double seconds = 0;
  int64_t episodes = 0;
  double episode_return = 0;
  double mean_return = 0;  // over the last `window` episodes (fewer at the start)
};

struct RlRun {
  bool reached = false;
  int64_t env_steps_to_target = -1;  // -1: not reached
  double time_to_target_s = -1;
  int64_t episodes_to_target = -1;
  int64_t env_steps = 0;
  int64_t updates = 0;
  double seconds = 0;
  double best_mean_return = 0;       // the best windowed mean seen (after a full window)
  std::vector<RlProgress> curve;     // one point per finished episode
  std::string target;                // the target in force ("return>=475")
  std::string stop_reason;           // "target return>=475 met", "max_env_steps N reached before ..."
};

// What an agent's name means, for listings: reinforce, a2c, dqn.
std::vector<std::pair<std::string, std::string>> agent_names();

// The quality target "return>=X" (also >, and <=/< for environments whose return is a cost);
// "return" is the only measure. InvalidArgument for anything else.
QualityTarget parse_return_target(const std::string& text);

// Trains one agent from scratch. InvalidArgument for an unknown agent, environment, optimizer or
// option out of range, naming it; Unimplemented when the backend has no graph executor.
// `on_episode` sees every point of the curve as it is appended.
RlRun train_agent(const AgentOptions& options, const std::function<void(const RlProgress&)>& on_episode = {});

}  // namespace d5
