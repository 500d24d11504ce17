// Acrobot-v1 (Sutton 1996; Sutton & Barto's book formulation, as Gym/Gymnasium publish it): two
// links hanging from a joint, only the joint between them actuated with torque -1, 0 or +1
// (actions 0, 1, 2). State (theta1, theta2, dtheta1, dtheta2); the observation is
// (cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2).
//
// Masses m1 = m2 = 1, lengths l1 = 1, centres of mass lc1 = lc2 = 0.5, moments of inertia
// I1 = I2 = 1, g = 9.8. With a the torque:
//   d1 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos theta2) + I1 + I2
//   d2 = m2 (lc2^2 + l1 lc2 cos theta2) + I2
//   phi2 = m2 lc2 g cos(theta1 + theta2 - pi/2)
//   phi1 = -m2 l1 lc2 dtheta2^2 sin theta2 - 2 m2 l1 lc2 dtheta2 dtheta1 sin theta2
//          + (m1 lc1 + m2 l1) g cos(theta1 - pi/2) + phi2
//   ddtheta2 = (a + d2/d1 phi1 - m2 l1 lc2 dtheta1^2 sin theta2 - phi2) / (m2 lc2^2 + I2 - d2^2/d1)
//   ddtheta1 = -(d2 ddtheta2 + phi1) / d1
// integrated over dt = 0.2 s by one classical Runge-Kutta step (the torque held constant); then
// the angles are wrapped into [-pi, pi] and the velocities clipped to 4 pi and 9 pi. Reward -1
// per step until the free end is more than one link length above the pivot
// (-cos theta1 - cos(theta1 + theta2) > 1), which terminates with reward 0; truncated at 500
// steps. Initial states are uniform in [-0.1, 0.1]^4. Gym lists -100 as the threshold.
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "deep500/core/error.h"
#include "rl_internal.h"

namespace d5 {

namespace {

constexpr double kM1 = 1, kM2 = 1, kL1 = 1, kLc1 = 0.5, kLc2 = 0.5, kI1 = 1, kI2 = 1, kG = 9.8, kDt = 0.2;
constexpr double kMaxVel1 = 4 * std::numbers::pi, kMaxVel2 = 9 * std::numbers::pi;
constexpr double kPi = std::numbers::pi;

using State = std::array<double, 4>;

State derivative(const State& s, double torque) {
  const auto [theta1, theta2, dtheta1, dtheta2] = s;
  const double d1 = kM1 * kLc1 * kLc1 + kM2 * (kL1 * kL1 + kLc2 * kLc2 + 2 * kL1 * kLc2 * std::cos(theta2)) + kI1 + kI2;
  const double d2 = kM2 * (kLc2 * kLc2 + kL1 * kLc2 * std::cos(theta2)) + kI2;
  const double phi2 = kM2 * kLc2 * kG * std::cos(theta1 + theta2 - kPi / 2);
  const double phi1 = -kM2 * kL1 * kLc2 * dtheta2 * dtheta2 * std::sin(theta2) -
                      2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (kM1 * kLc1 + kM2 * kL1) * kG * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 = (torque + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * dtheta1 * dtheta1 * std::sin(theta2) - phi2) /
                          (kM2 * kLc2 * kLc2 + kI2 - d2 * d2 / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  return {dtheta1, dtheta2, ddtheta1, ddtheta2};
}

State axpy(const State& y, double h, const State& k) {
  return {y[0] + h * k[0], y[1] + h * k[1], y[2] + h * k[2], y[3] + h * k[3]};
}

// Gym's wrap: shifts by whole periods until x lies in [lo, hi].
double wrap(double x, double lo, double hi) {
  const double period = hi - lo;
  while (x > hi) x -= period;
  while (x < lo) x += period;
  return x;
}

class Acrobot final : public Environment {
 public:
  std::string name() const override { return "acrobot"; }
  int64_t observation_size() const override { return 6; }
  int64_t actions() const override { return 3; }
  int64_t max_episode_steps() const override { return 500; }
  double reward_threshold() const override { return -100; }

  void reset(RngStream& rng, std::span<double> observation) override {
    for (double& v : s_) v = rng.uniform(-0.1, 0.1);
    elapsed_ = 0;
    write(observation);
  }

  EnvStep step(int64_t action, std::span<double> observation) override {
    check_action(*this, action);
    const double torque = static_cast<double>(action) - 1.0;
    const State k1 = derivative(s_, torque);
    const State k2 = derivative(axpy(s_, kDt / 2, k1), torque);
    const State k3 = derivative(axpy(s_, kDt / 2, k2), torque);
    const State k4 = derivative(axpy(s_, kDt, k3), torque);
    State n;
    for (size_t i = 0; i < 4; ++i) n[i] = s_[i] + kDt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    n[0] = wrap(n[0], -kPi, kPi);
    n[1] = wrap(n[1], -kPi, kPi);
    n[2] = std::clamp(n[2], -kMaxVel1, kMaxVel1);
    n[3] = std::clamp(n[3], -kMaxVel2, kMaxVel2);
    s_ = n;
    ++elapsed_;
    write(observation);
    EnvStep r;
    r.terminated = -std::cos(s_[0]) - std::cos(s_[1] + s_[0]) > 1.0;
    r.reward = r.terminated ? 0.0 : -1.0;
    r.truncated = !r.terminated && elapsed_ >= max_episode_steps();
    return r;
  }

  std::vector<double> state() const override { return {s_.begin(), s_.end()}; }
  void set_state(std::span<const double> state) override {
    D5_CHECK_ARG(state.size() == 4, "acrobot's state has 4 values (theta1, theta2, dtheta1, dtheta2), got {}",
                 state.size());
    std::copy(state.begin(), state.end(), s_.begin());
  }

 private:
  void write(std::span<double> o) const {
    check_observation(*this, o);
    o[0] = std::cos(s_[0]);
    o[1] = std::sin(s_[0]);
    o[2] = std::cos(s_[1]);
    o[3] = std::sin(s_[1]);
    o[4] = s_[2];
    o[5] = s_[3];
  }

  State s_{};
  int64_t elapsed_ = 0;
};

}  // namespace

std::unique_ptr<Environment> make_acrobot() { return std::make_unique<Acrobot>(); }

}  // namespace d5
