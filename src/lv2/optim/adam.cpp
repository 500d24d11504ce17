// Adam (Kingma & Ba) and AdamW (decoupled weight decay, Loshchilov & Hutter) as torch.optim:
//   adam:  g = g + wd * p            adamw: p = p * (1 - lr * wd)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g        (amsgrad: vmax = max(vmax, v), used below)
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// One pass over p, g, m, v: 4 reads and 3 writes per element.
#include "optim_internal.h"

namespace d5::optim {
namespace {

class Adam final : public UpdateRuleOptimizer {
 public:
  Adam(const Hyperparameters& h, bool decoupled)
      : UpdateRuleOptimizer({{"lr", 1e-3},
                             {"beta1", 0.9},
                             {"beta2", 0.999},
                             {"eps", 1e-8},
                             {"weight_decay", decoupled ? 1e-2 : 0.0},
                             {"amsgrad", 0.0}},
                            h),
        decoupled_(decoupled) {
    for (const char* b : {"beta1", "beta2"})
      D5_CHECK_ARG(hyper_.at(b) >= 0 && hyper_.at(b) < 1, "{}: {} must be in [0, 1), not {}", name(), b, hyper_.at(b));
    D5_CHECK_ARG(hyper_.at("eps") >= 0, "{}: eps must be >= 0, not {}", name(), hyper_.at("eps"));
  }
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    const double lr = current_learning_rate();
    const double beta1 = hyper_.at("beta1"), beta2 = hyper_.at("beta2");
    const double t = (steps_of_[pname] += 1);
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
    const float c1 = static_cast<float>(1 - beta1), c2 = static_cast<float>(1 - beta2);
    const float eps = static_cast<float>(hyper_.at("eps"));
    const float step_size = static_cast<float>(lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float wd = static_cast<float>(hyper_.at("weight_decay"));
    const float decay = static_cast<float>(1.0 - lr * hyper_.at("weight_decay"));
    const bool amsgrad = hyper_.at("amsgrad") != 0;
    const float* __restrict g = grad.data_as<float>();
    float* __restrict p = param.data_as<float>();
    float* __restrict m = exp_avg_.get(pname, param);
    float* __restrict v = exp_avg_sq_.get(pname, param);
    float* __restrict vmax = amsgrad ? max_exp_avg_sq_.get(pname, param) : nullptr;
    const int64_t n = param.numel();
    if (decoupled_) {
      for_chunks(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) p[i] = p[i] * decay;
      });
    }
    const bool coupled_decay = !decoupled_ && wd != 0;
    for_chunks(n, [&](int64_t b, int64_t e) {
      if (amsgrad) {
        for (int64_t i = b; i < e; ++i) {
          const float gi = coupled_decay ? g[i] + wd * p[i] : g[i];
          m[i] = m[i] * b1 + c1 * gi;
          v[i] = v[i] * b2 + c2 * (gi * gi);
          vmax[i] = std::max(vmax[i], v[i]);
          p[i] = p[i] - step_size * (m[i] / (std::sqrt(vmax[i]) / bc2_sqrt + eps));
        }
        return;
      }
      for (int64_t i = b; i < e; ++i) {
        const float gi = coupled_decay ? g[i] + wd * p[i] : g[i];
        const float mi = m[i] * b1 + c1 * gi;
        const float vi = v[i] * b2 + c2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
      }
    });
  }

  OptimizerState state() const override {
    OptimizerState s = UpdateRuleOptimizer::state();
    exp_avg_.save(s);
    exp_avg_sq_.save(s);
    max_exp_avg_sq_.save(s);
    steps_of_.save(s);
    return s;
  }
  void load_state(const OptimizerState& s) override {
    UpdateRuleOptimizer::load_state(s);
    exp_avg_.load(s);
    exp_avg_sq_.load(s);
    max_exp_avg_sq_.load(s);
    steps_of_.load(s);
  }

 private:
  bool decoupled_;
  Buffers exp_avg_{"exp_avg"}, exp_avg_sq_{"exp_avg_sq"}, max_exp_avg_sq_{"max_exp_avg_sq"};
  Scalars steps_of_{"step"};  // per parameter, as torch (a parameter may miss a gradient)
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(const Hyperparameters& h, bool decoupled) {
  return std::make_unique<Adam>(h, decoupled);
}

}  // namespace d5::optim
