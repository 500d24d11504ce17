// CartPole-v1 (Barto, Sutton & Anderson 1983, as Gym/Gymnasium publish it): a pole hinged on a
// cart that moves along a frictionless track; the agent pushes the cart left (action 0) or right
// (action 1) with 10 N. State (x, x_dot, theta, theta_dot); the observation is the state.
//
// One step of tau = 0.02 s, explicit Euler, with total mass M = m_c + m_p and half pole length l:
//   temp      = (F + m_p l theta_dot^2 sin theta) / M
//   theta_acc = (g sin theta - cos theta temp) / (l (4/3 - m_p cos^2 theta / M))
//   x_acc     = temp - m_p l theta_acc cos theta / M
//   x += tau x_dot;  x_dot += tau x_acc;  theta += tau theta_dot;  theta_dot += tau theta_acc
// (positions advance with the old velocities). Reward 1 for every step, the failing one included;
// the episode terminates when |x| > 2.4 or |theta| > 12 degrees, and is truncated at 500 steps.
// Initial states are uniform in [-0.05, 0.05]^4. Solved at a mean return of 475.
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "deep500/core/error.h"
#include "rl_internal.h"

namespace d5 {

namespace {

constexpr double kGravity = 9.8, kCartMass = 1.0, kPoleMass = 0.1, kHalfLength = 0.5, kForce = 10.0, kTau = 0.02;
constexpr double kTotalMass = kCartMass + kPoleMass, kPoleMassLength = kPoleMass * kHalfLength;
constexpr double kXLimit = 2.4, kThetaLimit = 12 * 2 * std::numbers::pi / 360;

class CartPole final : public Environment {
 public:
  std::string name() const override { return "cartpole"; }
  int64_t observation_size() const override { return 4; }
  int64_t actions() const override { return 2; }
  int64_t max_episode_steps() const override { return 500; }
  double reward_threshold() const override { return 475; }

  void reset(RngStream& rng, std::span<double> observation) override {
    for (double& v : s_) v = rng.uniform(-0.05, 0.05);
    elapsed_ = 0;
    write(observation);
  }

  EnvStep step(int64_t action, std::span<double> observation) override {
    check_action(*this, action);
    const double force = action == 1 ? kForce : -kForce;
    const auto [x, x_dot, theta, theta_dot] = s_;
    const double c = std::cos(theta), s = std::sin(theta);
    const double temp = (force + kPoleMassLength * theta_dot * theta_dot * s) / kTotalMass;
    const double theta_acc = (kGravity * s - c * temp) / (kHalfLength * (4.0 / 3.0 - kPoleMass * c * c / kTotalMass));
    const double x_acc = temp - kPoleMassLength * theta_acc * c / kTotalMass;
    s_ = {x + kTau * x_dot, x_dot + kTau * x_acc, theta + kTau * theta_dot, theta_dot + kTau * theta_acc};
    ++elapsed_;
    write(observation);
    EnvStep r;
    r.reward = 1.0;
    r.terminated = std::abs(s_[0]) > kXLimit || std::abs(s_[2]) > kThetaLimit;
    r.truncated = !r.terminated && elapsed_ >= max_episode_steps();
    return r;
  }

  std::vector<double> state() const override { return {s_.begin(), s_.end()}; }
  void set_state(std::span<const double> state) override {
    D5_CHECK_ARG(state.size() == 4, "cartpole's state has 4 values (x, x_dot, theta, theta_dot), got {}",
                 state.size());
    std::copy(state.begin(), state.end(), s_.begin());
  }

 private:
  void write(std::span<double> observation) const {
    check_observation(*this, observation);
    std::copy(s_.begin(), s_.end(), observation.begin());
  }

  std::array<double, 4> s_{};
  int64_t elapsed_ = 0;
};

}  // namespace

std::unique_ptr<Environment> make_cartpole() { return std::make_unique<CartPole>(); }

}  // namespace d5
