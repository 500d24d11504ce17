// The environment registry and VectorEnv (environment.h).
#include <fmt/format.h>

#include "deep500/core/registry.h"
#include "rl_internal.h"

namespace d5 {

namespace {

Registry<EnvironmentFactory>& registry() {
  static Registry<EnvironmentFactory>* r = [] {
    auto* reg = new Registry<EnvironmentFactory>("environment");
    reg->add("cartpole", "CartPole-v1: balance a pole on a cart, 2 actions, 4 observations, solved at 475",
             make_cartpole);
    reg->add("acrobot", "Acrobot-v1: swing a two-link arm up, 3 actions, 6 observations, solved at -100",
             make_acrobot);
    return reg;
  }();
  return *r;
}

}  // namespace

std::unique_ptr<Environment> make_environment(const std::string& name) { return (*registry().get(name))(); }

std::vector<std::pair<std::string, std::string>> environment_names() { return registry().descriptions(); }

void register_environment(const std::string& name, const std::string& description, EnvironmentFactory factory) {
  registry().add(name, description, std::move(factory));
}

VectorEnv::VectorEnv(const std::string& env, int64_t copies, uint64_t seed) {
  D5_CHECK_ARG(copies >= 1, "a vector of environments needs at least one copy, got {}", copies);
  for (int64_t i = 0; i < copies; ++i) {
    envs_.push_back(make_environment(env));
    rngs_.emplace_back(seed, fmt::format("rl/{}/{}", env, i));
  }
  obs_size_ = envs_.front()->observation_size();
  const auto n = static_cast<size_t>(copies);
  obs_.assign(n * static_cast<size_t>(obs_size_), 0.0);
  final_obs_ = obs_;
  returns_.assign(n, 0.0);
  lengths_.assign(n, 0);
  results_.resize(n);
  for (size_t i = 0; i < n; ++i)
    envs_[i]->reset(rngs_[i], std::span<double>(obs_).subspan(i * static_cast<size_t>(obs_size_), obs_size_));
}

const std::vector<EnvStep>& VectorEnv::step(std::span<const int64_t> actions) {
  D5_CHECK_ARG(static_cast<int64_t>(actions.size()) == copies(), "{} actions for {} environments", actions.size(),
               copies());
  const auto width = static_cast<size_t>(obs_size_);
  for (size_t i = 0; i < envs_.size(); ++i) {
    if (actions[i] < 0) {
      results_[i] = EnvStep{};
      continue;
    }
    std::span<double> obs = std::span<double>(obs_).subspan(i * width, width);
    const EnvStep r = envs_[i]->step(actions[i], obs);
    results_[i] = r;
    ++steps_;
    returns_[i] += r.reward;
    ++lengths_[i];
    if (r.terminated || r.truncated) {
      std::copy(obs.begin(), obs.end(), final_obs_.begin() + static_cast<std::ptrdiff_t>(i * width));
      finished_.push_back({static_cast<int64_t>(i), returns_[i], lengths_[i], steps_, r.truncated});
      returns_[i] = 0;
      lengths_[i] = 0;
      envs_[i]->reset(rngs_[i], obs);
    }
  }
  return results_;
}

std::span<const double> VectorEnv::final_observation(int64_t i) const {
  D5_CHECK_ARG(i >= 0 && i < copies(), "no environment {} (copies: {})", i, copies());
  return std::span<const double>(final_obs_).subspan(static_cast<size_t>(i * obs_size_), static_cast<size_t>(obs_size_));
}

std::vector<Episode> VectorEnv::take_finished() { return std::exchange(finished_, {}); }

}  // namespace d5
