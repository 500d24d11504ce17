// AcceleGrad (Levy, Yurtsever & Cevher, NeurIPS 2018), as Deep500's three-step listing: the
// gradient is taken at x_{t+1} = tau_t z_t + (1 - tau_t) y_t, which prepare_param writes into the
// network before the forward pass; update_rule then writes the new iterate y_{t+1}:
//   alpha_t = 1 for t <= 2, (t + 1) / 4 after; tau_t = 1 / alpha_t
//   S_t = S_{t-1} + alpha_t^2 ||g_t||^2          (per parameter tensor)
//   eta_t = lr * 2 D / sqrt(G^2 + S_t)
//   z_{t+1} = z_t - alpha_t eta_t g_t;   y_{t+1} = x_{t+1} - eta_t g_t
// The network holds y between steps, so z and S are the whole state. A parameter without a
// gradient keeps x_{t+1} and its z and S, which is the update for a zero gradient.
#include "optim_internal.h"

namespace d5::optim {

void accelegrad_interpolate_kernel(int64_t b, int64_t e, float* __restrict p, const float* __restrict z,
                                   const AcceleGradScalars& s) {
  for (int64_t i = b; i < e; ++i) p[i] = s.tau * z[i] + s.rest * p[i];
}

void accelegrad_step_kernel(int64_t b, int64_t e, const float* __restrict g, float* __restrict p,
                            float* __restrict z, const AcceleGradScalars& s) {
  for (int64_t i = b; i < e; ++i) {
    z[i] = z[i] - s.step_z * g[i];
    p[i] = p[i] - s.step_y * g[i];
  }
}

namespace {

class AcceleGrad final : public WithStateParts<ThreeStepOptimizer> {
 public:
  explicit AcceleGrad(const Hyperparameters& h)
      : WithStateParts({{"lr", 1.0}, {"diameter", 1.0}, {"gradient_bound", 1.0}}, h) {
    parts_ = {&z_, &squared_sum_};
    D5_CHECK_ARG(hyper_.at("diameter") > 0, "accelegrad: diameter must be > 0, not {}", hyper_.at("diameter"));
  }
  std::string name() const override { return "accelegrad"; }

  void new_input() override {
    const double t = static_cast<double>(steps_);
    alpha_ = t <= 2 ? 1.0 : 0.25 * (t + 1);
  }

  void prepare_param(const std::string& pname, Tensor& param) override {
    if (param.dtype() != DType::f32) return;  // update_rule refuses it with the reason
    const bool first = !z_.has(pname);
    FusedUpdate u = update_of(first ? UpdateKind::copy_param : UpdateKind::accelegrad_interpolate, nullptr, param);
    u.state[0] = z_.get(pname, param);  // x_1 = z_0 = y_0 on the first step
    u.scalars.accelegrad = AcceleGradScalars{static_cast<float>(1 / alpha_), static_cast<float>(1 - 1 / alpha_), 0, 0};
    run_update(param.device(), u);
  }

  // Every gradient's norm first, in one call per device, then the updates.
  void update_all(std::vector<ParameterUpdate>& updates) override {
    std::vector<const Tensor*> grads;
    for (const auto& u : updates) {
      check_f32(name(), u.name, u.grad, u.param);
      grads.push_back(&u.grad);
    }
    const std::vector<double> norms = squared_norms(grads);
    for (size_t i = 0; i < updates.size(); ++i) norm_of_[updates[i].name] = norms[i];
    ThreeStepOptimizer::update_all(updates);
    norm_of_.clear();
  }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    auto known = norm_of_.find(pname);
    const double norm2 = known != norm_of_.end() ? known->second : squared_norms({&grad}).front();
    double& sum = squared_sum_[pname];
    sum += alpha_ * alpha_ * norm2;
    const double gb = hyper_.at("gradient_bound");
    const double eta = current_learning_rate() * 2 * hyper_.at("diameter") / std::sqrt(gb * gb + sum);
    FusedUpdate u = update_of(UpdateKind::accelegrad_step, &grad, param);
    u.state[0] = z_.get(pname, param);
    u.scalars.accelegrad = AcceleGradScalars{0, 0, static_cast<float>(eta), static_cast<float>(alpha_ * eta)};
    run_update(param.device(), u);
  }

 private:
  double alpha_ = 1;
  Buffers z_{"z"};
  Scalars squared_sum_{"squared_sum"};
  std::map<std::string, double> norm_of_;  // during update_all
};

}  // namespace

std::unique_ptr<Optimizer> make_accelegrad(const Hyperparameters& h) { return std::make_unique<AcceleGrad>(h); }

}  // namespace d5::optim
