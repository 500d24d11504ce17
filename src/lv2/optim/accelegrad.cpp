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
    float* __restrict z = z_.get(pname, param);
    float* __restrict p = param.data_as<float>();
    const int64_t n = param.numel();
    if (first) {
      std::copy(p, p + n, z);
      return;  // x_1 = z_0 = y_0
    }
    const float tau = static_cast<float>(1 / alpha_), rest = static_cast<float>(1 - 1 / alpha_);
    for_chunks(n, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = tau * z[i] + rest * p[i];
    });
  }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    const float* __restrict g = grad.data_as<float>();
    float* __restrict p = param.data_as<float>();
    float* __restrict z = z_.get(pname, param);
    const int64_t n = param.numel();
    double norm2 = 0;
#pragma omp parallel for reduction(+ : norm2) schedule(static) if (n > 4 * kChunk)
    for (int64_t i = 0; i < n; ++i) norm2 += static_cast<double>(g[i]) * g[i];
    double& sum = squared_sum_[pname];
    sum += alpha_ * alpha_ * norm2;
    const double gb = hyper_.at("gradient_bound");
    const double eta = current_learning_rate() * 2 * hyper_.at("diameter") / std::sqrt(gb * gb + sum);
    const float step_y = static_cast<float>(eta), step_z = static_cast<float>(alpha_ * eta);
    for_chunks(n, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        z[i] = z[i] - step_z * g[i];
        p[i] = p[i] - step_y * g[i];
      }
    });
  }


 private:
  double alpha_ = 1;
  Buffers z_{"z"};
  Scalars squared_sum_{"squared_sum"};
};

}  // namespace

std::unique_ptr<Optimizer> make_accelegrad(const Hyperparameters& h) { return std::make_unique<AcceleGrad>(h); }

}  // namespace d5::optim
