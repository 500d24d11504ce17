// train_agent: options checked, the agent dispatched (agent.h).
#include "deep500/rl/agent.h"

#include <cmath>

#include "agent_common.h"
#include "deep500/core/error.h"
#include "deep500/core/registry.h"

namespace d5 {

namespace {

using AgentFn = RlRun (*)(const AgentOptions&, rl::RunTracker&);

const Registry<AgentFn>& agents() {
  static const Registry<AgentFn>* r = [] {
    auto* reg = new Registry<AgentFn>("agent");
    reg->add("reinforce", "REINFORCE with a learned baseline: one whole episode per copy per update",
             rl::train_reinforce);
    reg->add("a2c", "advantage actor-critic: n-step rollouts, bootstrapped returns, entropy bonus", rl::train_a2c);
    reg->add("dqn", "deep Q-learning: replay buffer, target network, epsilon-greedy, Huber loss", rl::train_dqn);
    return reg;
  }();
  return *r;
}

void check_options(const AgentOptions& o) {
  D5_CHECK_ARG(o.envs >= 1, "--envs must be at least 1, got {}", o.envs);
  D5_CHECK_ARG(o.hidden >= 1, "--hidden must be at least 1, got {}", o.hidden);
  D5_CHECK_ARG(o.gamma >= 0 && o.gamma <= 1, "--gamma must lie in [0, 1], got {}", o.gamma);
  D5_CHECK_ARG(o.max_env_steps >= 1, "--max-env-steps must be at least 1, got {}", o.max_env_steps);
  D5_CHECK_ARG(o.window >= 1, "--window must be at least 1 episode, got {}", o.window);
  D5_CHECK_ARG(o.rollout >= 1, "--rollout must be at least 1 step, got {}", o.rollout);
  D5_CHECK_ARG(o.value_coef >= 0 && o.entropy_coef >= 0, "--value-coef and --entropy-coef must not be negative");
  D5_CHECK_ARG(o.batch >= 1 && o.buffer >= o.batch,
               "--batch ({}) must be at least 1 and --buffer ({}) at least the batch", o.batch, o.buffer);
  D5_CHECK_ARG(o.train_every >= 1 && o.target_every >= 1 && o.learning_starts >= 0,
               "--train-every and --target-every must be at least 1, --learning-starts not negative");
  D5_CHECK_ARG(o.epsilon_start >= 0 && o.epsilon_start <= 1 && o.epsilon_end >= 0 && o.epsilon_end <= 1 &&
                   o.epsilon_fraction >= 0 && o.epsilon_fraction <= 1,
               "epsilon start, end and fraction must lie in [0, 1]");
  D5_CHECK_ARG(std::isnan(o.target.threshold) || o.target.measure == "return",
               "an agent's target measures 'return', not '{}'", o.target.measure);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> agent_names() { return agents().descriptions(); }

QualityTarget parse_return_target(const std::string& text) {
  QualityTarget t = parse_target_syntax(text);
  D5_CHECK_ARG(t.measure == "return",
               "target \"{}\": an agent is judged by its mean episode return; write e.g. \"return>=475\"", text);
  return t;
}

RlRun train_agent(const AgentOptions& options, const std::function<void(const RlProgress&)>& on_episode) {
  check_options(options);
  const auto fn = agents().get(options.agent);
  const auto env = make_environment(options.env);
  rl::RunTracker tracker(options, *env, on_episode);
  return (*fn)(options, tracker);
}

}  // namespace d5
