#pragma once
// Level 2, reinforcement learning: environments (docs/rl.md).
//
// An Environment is a discrete-action control task with a continuous observation vector, written
// in C++ after Gym's published dynamics (CartPole-v1, Acrobot-v1) so that agents train without
// Python and every transition is reproducible from a seed. Episodes end by termination (the task
// failed or succeeded) or by truncation (the time limit); agents bootstrap through a truncation,
// never through a termination, as Gymnasium's API distinguishes them.
//
// VectorEnv steps N copies in lockstep and resets a copy as soon as its episode ends (the
// observation it returns is then the new episode's first one; the last observation of the ended
// episode is kept in final_observation for bootstrapping). Copy i draws its initial states from
// the stream (seed, "rl/<env>/<i>"), so runs with the same seed see the same episodes.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "deep500/core/rng.h"

namespace d5 {

struct EnvStep {
  double reward = 0;
  bool terminated = false;  // the task ended (pole fell, goal reached): no future reward
  bool truncated = false;   // the time limit cut the episode: the future was not zero
};

class Environment {
 public:
  virtual ~Environment() = default;
  virtual std::string name() const = 0;
  virtual int64_t observation_size() const = 0;
  virtual int64_t actions() const = 0;
  virtual int64_t max_episode_steps() const = 0;
  // The mean return over 100 consecutive episodes at which Gym calls the task solved.
  virtual double reward_threshold() const = 0;

  // Starts an episode from a random initial state and writes its observation.
  virtual void reset(RngStream& rng, std::span<double> observation) = 0;
  // Applies `action` (0 <= action < actions(), else InvalidArgument), writes the next observation.
  // Counts steps itself: the step that reaches max_episode_steps() is truncated unless terminated.
  virtual EnvStep step(int64_t action, std::span<double> observation) = 0;

  // The raw state (not the observation), for tests against hand-derived dynamics.
  virtual std::vector<double> state() const = 0;
  virtual void set_state(std::span<const double> state) = 0;
};

// cartpole (CartPole-v1), acrobot (Acrobot-v1).
std::unique_ptr<Environment> make_environment(const std::string& name);
std::vector<std::pair<std::string, std::string>> environment_names();  // name, description
using EnvironmentFactory = std::function<std::unique_ptr<Environment>()>;
void register_environment(const std::string& name, const std::string& description, EnvironmentFactory factory);

// One finished episode of a VectorEnv.
struct Episode {
  int64_t env = 0;         // which copy
  double episode_return = 0;
  int64_t length = 0;
  int64_t end_step = 0;    // VectorEnv::steps() when it ended (environment steps over all copies)
  bool truncated = false;
};

class VectorEnv {
 public:
  VectorEnv(const std::string& env, int64_t copies, uint64_t seed);

  int64_t copies() const { return static_cast<int64_t>(envs_.size()); }
  int64_t observation_size() const { return obs_size_; }
  int64_t actions() const { return envs_.front()->actions(); }
  const Environment& environment(int64_t i = 0) const { return *envs_.at(static_cast<size_t>(i)); }

  // [copies, observation_size], row-major: each copy's current observation.
  const std::vector<double>& observations() const { return obs_; }
  // Steps every copy with its action (actions.size() == copies()); returns per-copy results.
  // A copy whose episode ended is reset; its last observation is in final_observation(i). A
  // negative action leaves that copy idle for the step (not stepped, not counted, its result all
  // false): agents that play whole episodes per copy wait that way for the longest one.
  const std::vector<EnvStep>& step(std::span<const int64_t> actions);
  std::span<const double> final_observation(int64_t i) const;

  int64_t steps() const { return steps_; }  // environment steps so far, over all copies
  // Episodes finished since the last call, in the order they ended.
  std::vector<Episode> take_finished();

 private:
  std::vector<std::unique_ptr<Environment>> envs_;
  std::vector<RngStream> rngs_;
  int64_t obs_size_ = 0;
  std::vector<double> obs_, final_obs_, returns_;
  std::vector<int64_t> lengths_;
  std::vector<EnvStep> results_;
  std::vector<Episode> finished_;
  int64_t steps_ = 0;
};

}  // namespace d5
