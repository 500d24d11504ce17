#pragma once
// What the three agents share (not installed): acting through an executor, sampling, the run's
// learning curve and stopping rule.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "deep500/core/rng.h"
#include "deep500/net/graph_executor.h"
#include "deep500/rl/agent.h"

namespace d5::rl {

// Writes rows [row, row + rows) of the f32 tensor `dst` [batch, width] from doubles.
void write_rows(Tensor& dst, int64_t row, std::span<const double> values);

// A network at the batch of the environment copies, run for acting; its parameters are shared with
// the trained network (share_parameters), so it always acts with the latest ones.
class ActingNetwork {
 public:
  ActingNetwork(Network network, const std::string& backend);
  Network& network() { return net_; }
  // Runs the network on one observation per copy ([copies, observation] doubles, row-major);
  // returns the outputs ("logits", and "value" for actor-critic), valid until the next run.
  const TensorMap& run(std::span<const double> observations);

 private:
  Network net_;
  std::unique_ptr<GraphExecutor> executor_;
  Tensor input_;
  TensorMap outputs_;
};

// For the copies the time limit cut in the step that returned `steps`: V of their final
// observations, from one more forward pass of the actor-critic's acting network (which replaces its
// earlier outputs). Empty when no copy was cut; otherwise one value per copy, NaN for the others.
std::vector<double> truncated_values(ActingNetwork& actor, const VectorEnv& envs, const std::vector<EnvStep>& steps);

// An action drawn from softmax(logits) with the stream's next uniform number.
int64_t sample_from_logits(std::span<const float> logits, RngStream& rng);
int64_t argmax(std::span<const float> values);

// The learning curve and the stopping rule of agent.h.
class RunTracker {
 public:
  RunTracker(const AgentOptions& options, const Environment& env,
             const std::function<void(const RlProgress&)>& on_episode);
  // Appends finished episodes to the curve; true once the target is met.
  bool record(const std::vector<Episode>& episodes);
  bool done(int64_t env_steps) const { return run_.reached || env_steps >= max_env_steps_; }
  RlRun finish(int64_t env_steps, int64_t updates);

 private:
  QualityTarget target_;
  int64_t window_, max_env_steps_;
  int64_t start_ns_;
  std::deque<double> recent_;
  double recent_sum_ = 0;
  RlRun run_;
  std::function<void(const RlProgress&)> on_episode_;
};

// The executor that trains `net` and the optimizer the options name.
std::unique_ptr<GraphExecutor> training_executor(Network& net, const AgentOptions& o);
std::unique_ptr<Optimizer> agent_optimizer(const AgentOptions& o);

// What reinforce and a2c train: the actor-critic with its loss at `rows` rows, the acting copy at
// one row per environment copy (sharing its parameters), the executor, the optimizer, and the
// loss's inputs, which the agent fills before each step(). Not movable: the executor holds `train`.
class ActorCritic {
 public:
  ActorCritic(const AgentOptions& o, const VectorEnv& envs, int64_t rows);
  ActorCritic(const ActorCritic&) = delete;
  ActorCritic& operator=(const ActorCritic&) = delete;

  ActingNetwork& actor() { return *actor_; }
  // One optimizer step on the inputs below.
  void step();

  Tensor observations, action_weights, row_weights, value_targets;

 private:
  Network train_;
  std::unique_ptr<ActingNetwork> actor_;
  std::unique_ptr<GraphExecutor> executor_;
  std::unique_ptr<Optimizer> optimizer_;
};

RlRun train_reinforce(const AgentOptions& o, RunTracker& tracker);
RlRun train_a2c(const AgentOptions& o, RunTracker& tracker);
RlRun train_dqn(const AgentOptions& o, RunTracker& tracker);

}  // namespace d5::rl
