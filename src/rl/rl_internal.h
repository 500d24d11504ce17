#pragma once
// Shared by the environments and agents of src/rl (not installed).
#include <memory>
#include <span>

#include "deep500/core/error.h"
#include "deep500/rl/environment.h"

namespace d5 {

inline void check_action(const Environment& env, int64_t action) {
  D5_CHECK_ARG(action >= 0 && action < env.actions(), "{}: action {} is not one of 0..{}", env.name(), action,
               env.actions() - 1);
}
inline void check_observation(const Environment& env, std::span<const double> observation) {
  D5_CHECK_ARG(static_cast<int64_t>(observation.size()) == env.observation_size(),
               "{}: an observation has {} values, the buffer holds {}", env.name(), env.observation_size(),
               observation.size());
}

std::unique_ptr<Environment> make_cartpole();
std::unique_ptr<Environment> make_acrobot();

}  // namespace d5
