// d5 rl: reinforcement-learning agents trained on C++ environments, time to "solved" over seeds
// (docs/rl.md).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/build_info.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/reporter.h"
#include "deep500/metrics/statistics.h"
#include "deep500/net/graph_executor.h"
#include "deep500/rl/agent.h"

namespace d5::cli {

namespace {

struct RlOpts {
  std::string env;
  std::vector<std::string> agents = {"reinforce"}, backends = {"reference"};
  std::vector<uint64_t> seeds;  // empty: the global --seed
  std::string target;           // empty: the environment's threshold
  double lr = 0;                // 0: the agent's default
  std::vector<std::string> hypers;
  int64_t curve_points = 200;
  AgentOptions agent;
  OutputOptions out;
};

// The learning curve thinned to about `points` entries (always keeping the last).
nlohmann::json thinned_curve(const std::vector<RlProgress>& curve, int64_t points) {
  nlohmann::json out = nlohmann::json::array();
  const size_t stride = std::max<size_t>(1, curve.size() / static_cast<size_t>(std::max<int64_t>(1, points)));
  for (size_t i = 0; i < curve.size(); ++i)
    if (i % stride == 0 || i + 1 == curve.size())
      out.push_back({curve[i].env_steps, curve[i].seconds, curve[i].mean_return});
  return out;
}

nlohmann::json or_null(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

CaseResult agent_case(const RlOpts& o, const std::string& agent, const std::string& backend) {
  CaseResult c;
  c.name = fmt::format("rl/{}/{}/{}", o.env, agent, backend);
  c.level = "L2";
  c.backend = backend;
  AgentOptions a = o.agent;
  a.agent = agent;
  a.backend = backend;
  c.params = {{"env", o.env},         {"agent", agent},           {"envs", a.envs},
              {"hidden", a.hidden},   {"gamma", a.gamma},         {"optimizer", a.optimizer},
              {"window", a.window},   {"max_env_steps", a.max_env_steps}, {"seeds", o.seeds}};
  for (const auto& [k, v] : a.hyper) c.params["hyper"][k] = v;
  if (skip_unbuilt_executor(backend, c)) return c;
  std::vector<double> steps_to, time_to, episodes_to, best, rate;
  nlohmann::json runs = nlohmann::json::array();
  std::string target_text;
  for (uint64_t seed : o.seeds) {
    a.seed = seed;
    const RlRun r = train_agent(a);
    if (r.reached) {
      steps_to.push_back(static_cast<double>(r.env_steps_to_target));
      time_to.push_back(r.time_to_target_s);
      episodes_to.push_back(static_cast<double>(r.episodes_to_target));
    }
    if (!std::isnan(r.best_mean_return)) best.push_back(r.best_mean_return);
    rate.push_back(static_cast<double>(r.env_steps) / std::max(r.seconds, 1e-9));
    runs.push_back({{"seed", seed},
                    {"reached", r.reached},
                    {"env_steps_to_target", r.reached ? nlohmann::json(r.env_steps_to_target) : nlohmann::json()},
                    {"time_to_target_s", r.reached ? nlohmann::json(r.time_to_target_s) : nlohmann::json()},
                    {"episodes_to_target", r.reached ? nlohmann::json(r.episodes_to_target) : nlohmann::json()},
                    {"best_mean_return", std::isnan(r.best_mean_return) ? nlohmann::json() : nlohmann::json(r.best_mean_return)},
                    {"env_steps", r.env_steps},
                    {"updates", r.updates},
                    {"seconds", r.seconds},
                    {"episodes", r.curve.size()},
                    {"stop_reason", r.stop_reason},
                    {"curve", thinned_curve(r.curve, o.curve_points)}});
    target_text = r.target;
  }
  if (!steps_to.empty()) {
    c.metrics.push_back(metric_record("env_steps_to_target", "steps", steps_to));
    c.metrics.push_back(metric_record("time_to_target", "s", time_to));
    c.metrics.push_back(metric_record("episodes_to_target", "episodes", episodes_to));
  }
  if (!best.empty()) c.metrics.push_back(metric_record("best_mean_return", "return", best));
  c.metrics.push_back(metric_record("env_steps_per_second", "steps/s", rate));
  const size_t n = o.seeds.size();
  const double success = static_cast<double>(steps_to.size()) / static_cast<double>(n);
  c.extra = {{"target", target_text},
             {"seeds", n},
             {"success_rate", success},
             {"time_to_target", or_null(median_counting_failures(time_to, n))},
             {"env_steps_to_target", or_null(median_counting_failures(steps_to, n))},
             {"runs", runs}};
  c.detail = fmt::format("{} of {} seeds reached the target", steps_to.size(), n);
  if (!steps_to.empty()) {
    const Summary s = summarize(steps_to);
    c.detail += fmt::format("; environment steps to it: median {:.0f}", s.median);
    if (s.median_ci.available) c.detail += fmt::format(", 95% CI [{:.0f}, {:.0f}]", s.median_ci.lower, s.median_ci.upper);
    c.detail += fmt::format(" ({:.3g} s median)", summarize(time_to).median);
  }
  return c;
}

int run_rl(RlOpts o, const GlobalOptions& g) {
  register_builtin_operators();
  if (o.env == "list") {
    std::string text = "environments:\n";
    for (const auto& [name, d] : environment_names()) text += fmt::format("  {:<10} {}\n", name, d);
    text += "agents:\n";
    for (const auto& [name, d] : agent_names()) text += fmt::format("  {:<10} {}\n", name, d);
    std::cout << text;
    return 0;
  }
  make_environment(o.env);  // an unknown name is refused before anything runs
  o.agent.env = o.env;
  ExperimentSettings settings = settings_from(g);
  if (o.seeds.empty()) o.seeds = {g.seed};
  if (!o.target.empty()) o.agent.target = parse_return_target(o.target);
  o.agent.hyper = parse_hyperparameters(o.hypers);
  if (o.lr > 0) o.agent.hyper["lr"] = o.lr;
  Results res;
  for (const auto& agent : o.agents)
    for (const auto& backend : o.backends) res.cases.push_back(agent_case(o, agent, backend));
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = {{"env", o.env}, {"agents", o.agents}, {"seeds", o.seeds}};
  emit(res, o.out);
  return exit_code_for(res);
}

}  // namespace

Command register_rl(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("rl",
                                 "Reinforcement learning: REINFORCE, A2C or DQN on CartPole-v1 or Acrobot-v1 (C++ "
                                 "environments after Gym), environment steps and time to 'solved' over seeds");
  auto o = std::make_shared<RlOpts>();
  AgentOptions& a = o->agent;
  cmd->add_option("env", o->env, "Environment: cartpole, acrobot ('list' prints environments and agents)")->required();
  cmd->add_option("--agent", o->agents, "Agents, comma-separated: reinforce, a2c, dqn")->delimiter(',')->capture_default_str();
  cmd->add_option("--backend", o->backends, "Graph executors, comma-separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--seeds", o->seeds, "Independent runs, one per seed, comma-separated (default: --seed)")->delimiter(',');
  cmd->add_option("--target", o->target,
                  "Quality target on the mean return of the last --window episodes, e.g. \"return>=475\" (default: "
                  "the environment's: cartpole 475, acrobot -100)");
  cmd->add_option("--window", a.window, "Episodes the mean return is taken over")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-env-steps", a.max_env_steps, "Environment steps after which a run stops unsolved")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--envs", a.envs, "Environment copies stepped together")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--hidden", a.hidden, "Units of each of the networks' two hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--gamma", a.gamma, "Discount factor")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--optimizer", a.optimizer, "Optimizer (see 'd5 train --help')")->capture_default_str();
  cmd->add_option("--lr", o->lr, "Learning rate (default: the optimizer's)")->check(CLI::PositiveNumber);
  cmd->add_option("--hyper", o->hypers, "Optimizer hyperparameter KEY=VALUE (repeatable)");
  cmd->add_option("--value-coef", a.value_coef, "reinforce, a2c: weight of the value loss")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--entropy-coef", a.entropy_coef, "reinforce, a2c: weight of the entropy bonus")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--rollout", a.rollout, "a2c: steps per copy per update")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("!--no-normalize-advantages", a.normalize_advantages, "reinforce: use raw advantages");
  cmd->add_option("--batch", a.batch, "dqn: transitions per update")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--buffer", a.buffer, "dqn: replay buffer capacity")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--learning-starts", a.learning_starts, "dqn: environment steps before the first update")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--train-every", a.train_every, "dqn: environment steps per update")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--target-every", a.target_every, "dqn: environment steps between target-network copies")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--epsilon-end", a.epsilon_end, "dqn: final exploration rate")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--epsilon-fraction", a.epsilon_fraction, "dqn: fraction of --max-env-steps over which epsilon anneals from 1")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--curve-points", o->curve_points, "Points of each run's learning curve kept in the result")
      ->check(CLI::PositiveNumber)->capture_default_str();
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_rl(*o, g); }};
}

}  // namespace d5::cli
