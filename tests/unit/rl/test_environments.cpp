// CartPole-v1 and Acrobot-v1 against values derived by hand from Gym's published equations, and
// VectorEnv's bookkeeping (resets, final observations, idle copies, determinism).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/rl/environment.h"

namespace d5 {
namespace {

std::vector<double> step_from(Environment& env, std::vector<double> state, int64_t action, EnvStep* result = nullptr) {
  env.set_state(state);
  std::vector<double> obs(static_cast<size_t>(env.observation_size()));
  const EnvStep r = env.step(action, obs);
  if (result) *result = r;
  return env.state();
}

// From rest with the push to the right (F = +10 N), M = 1.1, m_p l = 0.05:
//   temp = F / M = 100/11;  theta_acc = -temp / (l (4/3 - m_p/M)) = -(100/11) / (0.5 * 41/33) = -600/41
//   x_acc = temp - m_p l theta_acc / M = 100/11 + 300/451 = 400/41
// so after tau = 0.02 s: x_dot = 8/41, theta_dot = -12/41, and positions unchanged (Euler moves
// them with the old velocities, which were 0).
TEST(CartPole, OneStepFromRestMatchesTheHandDerivedAccelerations) {
  auto env = make_environment("cartpole");
  EnvStep r;
  const auto s = step_from(*env, {0, 0, 0, 0}, 1, &r);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_NEAR(s[1], 8.0 / 41.0, 1e-15);
  EXPECT_DOUBLE_EQ(s[2], 0.0);
  EXPECT_NEAR(s[3], -12.0 / 41.0, 1e-15);
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_FALSE(r.terminated);
  EXPECT_FALSE(r.truncated);
  // Pushing left mirrors it.
  const auto m = step_from(*env, {0, 0, 0, 0}, 0);
  EXPECT_NEAR(m[1], -8.0 / 41.0, 1e-15);
  EXPECT_NEAR(m[3], 12.0 / 41.0, 1e-15);
}

// A second step: positions advance with the velocities of the first (x = 0.02 * 8/41), and the
// pole's angular velocity enters temp through theta_dot^2 sin(theta), still 0 since theta = 0.
TEST(CartPole, PositionsAdvanceWithTheOldVelocities) {
  auto env = make_environment("cartpole");
  const auto s = step_from(*env, {0, 8.0 / 41.0, 0, -12.0 / 41.0}, 1);
  EXPECT_NEAR(s[0], 0.02 * 8.0 / 41.0, 1e-15);
  EXPECT_NEAR(s[2], 0.02 * -12.0 / 41.0, 1e-15);
  EXPECT_NEAR(s[1], 16.0 / 41.0, 1e-15);   // the same accelerations again
  EXPECT_NEAR(s[3], -24.0 / 41.0, 1e-15);
}

TEST(CartPole, TerminatesOutsideTheTrackOrTheAngleAndTruncatesAt500Steps) {
  auto env = make_environment("cartpole");
  const double limit = 12 * 2 * std::numbers::pi / 360;
  EnvStep r;
  step_from(*env, {2.39, 1.0, 0, 0}, 1, &r);  // x = 2.39 + 0.02 > 2.4
  EXPECT_TRUE(r.terminated);
  EXPECT_EQ(r.reward, 1.0);  // the failing step is rewarded too
  step_from(*env, {0, 0, limit - 0.001, 0.1}, 1, &r);  // theta = limit - 0.001 + 0.002
  EXPECT_TRUE(r.terminated);
  step_from(*env, {0, 0, limit - 0.003, 0.1}, 1, &r);  // still inside
  EXPECT_FALSE(r.terminated);
  // Held at the origin, the episode runs until the time limit and no longer.
  RngStream rng(1, "test");
  std::vector<double> obs(4);
  env->reset(rng, obs);
  for (int t = 1; t <= 500; ++t) {
    env->set_state(std::vector<double>{0, 0, 0, 0});
    r = env->step(t % 2, obs);
    ASSERT_FALSE(r.terminated) << t;
    ASSERT_EQ(r.truncated, t == 500) << t;
  }
}

TEST(CartPole, ResetDrawsEachStateValueFromTheInterval) {
  auto env = make_environment("cartpole");
  RngStream rng(7, "test");
  std::vector<double> obs(4);
  double lo = 1, hi = -1;
  for (int i = 0; i < 200; ++i) {
    env->reset(rng, obs);
    for (double v : obs) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(obs, env->state());
  }
  EXPECT_GE(lo, -0.05);
  EXPECT_LT(hi, 0.05);
  EXPECT_LT(lo, -0.045);  // the draws span the interval
  EXPECT_GT(hi, 0.045);
}

TEST(Environment, RefusesActionsAndStatesItDoesNotHave) {
  for (const char* name : {"cartpole", "acrobot"}) {
    auto env = make_environment(name);
    std::vector<double> obs(static_cast<size_t>(env->observation_size()));
    EXPECT_THROW(env->step(env->actions(), obs), InvalidArgument) << name;
    EXPECT_THROW(env->step(-1, obs), InvalidArgument) << name;
    EXPECT_THROW(env->set_state(std::vector<double>{0, 0}), InvalidArgument) << name;
    std::vector<double> small(2);
    EXPECT_THROW(env->step(0, small), InvalidArgument) << name;
  }
  EXPECT_THROW(make_environment("pong"), InvalidArgument);
}

// Hanging straight down without torque is an equilibrium; the observation is (cos, sin) of both
// angles and the two velocities.
TEST(Acrobot, RestingStraightDownStaysThere) {
  auto env = make_environment("acrobot");
  env->set_state(std::vector<double>{0, 0, 0, 0});
  std::vector<double> obs(6);
  for (int t = 0; t < 10; ++t) {
    const EnvStep r = env->step(1, obs);
    EXPECT_EQ(r.reward, -1.0);
    EXPECT_FALSE(r.terminated);
  }
  for (double v : env->state()) EXPECT_NEAR(v, 0.0, 1e-12);
  EXPECT_NEAR(obs[0], 1.0, 1e-12);
  EXPECT_NEAR(obs[1], 0.0, 1e-12);
  EXPECT_NEAR(obs[2], 1.0, 1e-12);
  EXPECT_NEAR(obs[3], 0.0, 1e-12);
}

// The mechanical energy of the double pendulum (theta = 0 pointing down):
//   T = 1/2 d11 w1^2 + d12 w1 w2 + 1/2 d22 w2^2,  d11 = d1, d12 = d2, d22 = m2 lc2^2 + I2
//   V = -(m1 lc1 + m2 l1) g cos theta1 - m2 lc2 g cos(theta1 + theta2)
// The book's equations are this Lagrangian's, so without torque E stays put up to the integrator's
// error (one RK4 step of 0.2 s: about 1e-3 relative over 20 steps from this state, measured), and
// the torque's work changes it by the sign of a * w2. The "nips" variant, which drops a term, or a
// wrong sign anywhere, does not conserve it (tens of percent).
double acrobot_energy(const std::vector<double>& s) {
  const double m1 = 1, m2 = 1, l1 = 1, lc1 = 0.5, lc2 = 0.5, i1 = 1, i2 = 1, g = 9.8;
  const double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(s[1])) + i1 + i2;
  const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(s[1])) + i2;
  const double d22 = m2 * lc2 * lc2 + i2;
  const double kinetic = 0.5 * d1 * s[2] * s[2] + d2 * s[2] * s[3] + 0.5 * d22 * s[3] * s[3];
  const double potential = -(m1 * lc1 + m2 * l1) * g * std::cos(s[0]) - m2 * lc2 * g * std::cos(s[0] + s[1]);
  return kinetic + potential;
}

TEST(Acrobot, WithoutTorqueTheEnergyIsConserved) {
  auto env = make_environment("acrobot");
  env->set_state(std::vector<double>{0.8, -0.4, 0.0, 0.0});
  const double e0 = acrobot_energy(env->state());
  std::vector<double> obs(6);
  for (int t = 0; t < 20; ++t) {
    env->step(1, obs);
    EXPECT_NEAR(acrobot_energy(env->state()), e0, 2e-3 * std::abs(e0)) << "step " << t;
  }
}

// From rest with torque +1, linearized about hanging down (sin x ~ x, cos x ~ 1): the mass matrix
// M = [[d1, d2], [d2, d22]] = [[4.5, 1.75], [1.75, 1.25]], gravity's stiffness
// K = [[(m1 lc1 + m2 l1) g + m2 lc2 g, m2 lc2 g], [m2 lc2 g, m2 lc2 g]] = [[19.6, 4.9], [4.9, 4.9]],
// and M theta'' + K theta = (0, 1). From rest, theta' (t) = a0 t - M^-1 K a0 t^3 / 6 + O(t^5) with
// a0 = M^-1 (0, 1) = (-0.6829, 1.7561) rad/s^2; the next term is about 5e-4 at t = 0.2 s.
TEST(Acrobot, TorqueFromRestFollowsTheLinearizedEquations) {
  auto env = make_environment("acrobot");
  const auto s = step_from(*env, {0, 0, 0, 0}, 2);
  const double det = 4.5 * 1.25 - 1.75 * 1.75;
  auto solve = [&](double b1, double b2) {  // M^-1 b
    return std::pair{(1.25 * b1 - 1.75 * b2) / det, (-1.75 * b1 + 4.5 * b2) / det};
  };
  const auto [a1, a2] = solve(0, 1);
  const auto [c1, c2] = solve(19.6 * a1 + 4.9 * a2, 4.9 * a1 + 4.9 * a2);
  const double t = 0.2;
  EXPECT_NEAR(s[2], a1 * t - c1 * t * t * t / 6, 1e-3);
  EXPECT_NEAR(s[3], a2 * t - c2 * t * t * t / 6, 1e-3);
  EXPECT_NEAR(s[0], a1 * t * t / 2 - c1 * t * t * t * t / 24, 1e-4);
  EXPECT_NEAR(s[1], a2 * t * t / 2 - c2 * t * t * t * t / 24, 1e-4);
  const auto m = step_from(*env, {0, 0, 0, 0}, 0);  // torque -1 mirrors it
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(m[i], -s[i], 1e-12);
}

TEST(Acrobot, AnglesWrapVelocitiesClipAndTheSwingUpTerminates) {
  auto env = make_environment("acrobot");
  EnvStep r;
  // The tip above one link length: -cos(t1) - cos(t1 + t2) > 1.
  auto s = step_from(*env, {std::numbers::pi, 0, 0, 0}, 1, &r);
  EXPECT_TRUE(r.terminated);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_LE(std::abs(s[0]), std::numbers::pi);
  s = step_from(*env, {3.1, 0, 20, 0}, 1, &r);  // spinning: theta1 passes pi and wraps
  EXPECT_LE(s[0], std::numbers::pi);
  EXPECT_GE(s[0], -std::numbers::pi);
  EXPECT_LE(std::abs(s[2]), 4 * std::numbers::pi);  // clipped at 4 pi
  s = step_from(*env, {0, 0, 0, 60}, 1);
  EXPECT_LE(std::abs(s[3]), 9 * std::numbers::pi);
}

TEST(VectorEnv, ResetsEndedEpisodesAndKeepsTheirFinalObservation) {
  VectorEnv envs("cartpole", 3, 11);
  ASSERT_EQ(envs.copies(), 3);
  std::vector<int64_t> right(3, 1);
  std::vector<Episode> done;
  int64_t guard = 0;
  while (done.empty() && ++guard < 1000) {
    const auto res = envs.step(right);
    for (int64_t i = 0; i < 3; ++i) {
      if (!res[i].terminated) continue;
      // The copy starts over: its new observation lies in the reset interval; the final one does not.
      const auto fin = envs.final_observation(i);
      EXPECT_TRUE(std::abs(fin[0]) > 2.4 || std::abs(fin[2]) > 0.2094);
      for (int k = 0; k < 4; ++k) EXPECT_LE(std::abs(envs.observations()[i * 4 + k]), 0.05);
    }
    for (auto& e : envs.take_finished()) done.push_back(e);
  }
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done[0].episode_return, static_cast<double>(done[0].length));
  EXPECT_EQ(envs.steps(), 3 * guard);
}

TEST(VectorEnv, IdleCopiesAreNotSteppedAndTheSameSeedReplaysTheSameEpisodes) {
  VectorEnv a("acrobot", 2, 5), b("acrobot", 2, 5), c("acrobot", 2, 6);
  EXPECT_EQ(a.observations(), b.observations());
  EXPECT_NE(a.observations(), c.observations());
  const std::vector<double> before = a.observations();
  std::vector<int64_t> actions = {-1, 2};
  const auto& res = a.step(actions);
  EXPECT_EQ(res[0].reward, 0.0);
  EXPECT_EQ(a.steps(), 1);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(a.observations()[k], before[k]);
  EXPECT_NE(a.observations()[6 + 5], before[6 + 5]);
  EXPECT_THROW(a.step(std::vector<int64_t>{1}), InvalidArgument);
  EXPECT_THROW(VectorEnv("cartpole", 0, 1), InvalidArgument);
}

}  // namespace
}  // namespace d5
