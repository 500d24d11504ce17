// Adam (Kingma & Ba) and AdamW (decoupled weight decay, Loshchilov & Hutter) as torch.optim:
//   adam:  g = g + wd * p            adamw: p = p * (1 - lr * wd)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g        (amsgrad: vmax = max(vmax, v), used below)
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// One pass over p, g, m, v: 4 reads and 3 writes per element.
#include "optim_internal.h"

namespace d5::optim {

// ATen's operations: p.mul_(decay) (adamw); g = g.add(p, wd) (adam); m.mul_(b1).add_(g, 1 - b1);
// v.mul_(b2).addcmul_(g, g, 1 - b2); denom = v.sqrt() / sqrt(bc2) + eps; p.addcdiv_(m, denom, -step).
D5_OPTIM_KERNEL void adam_kernel(int64_t b, int64_t e, const float* __restrict g, float* __restrict p,
                                 float* __restrict m, float* __restrict v, float* __restrict vmax,
                                 const AdamScalars& s) {
  if (vmax || s.decay != 1) {
    for (int64_t i = b; i < e; ++i) {
      const float pi = s.decay != 1 ? p[i] * s.decay : p[i];
      const float gi = s.wd != 0 ? madd(g[i], pi, s.wd) : g[i];
      m[i] = madd(m[i] * s.b1, gi, s.c1);
      v[i] = v[i] * s.b2 + s.c2 * gi * gi;
      const float vi = vmax ? (vmax[i] = std::max(vmax[i], v[i])) : v[i];
      p[i] = pi + s.neg_step_size * m[i] / (std::sqrt(vi) / s.bc2_sqrt + s.eps);
    }
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    const float gi = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    const float mi = madd(m[i] * s.b1, gi, s.c1);
    const float vi = v[i] * s.b2 + s.c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] + s.neg_step_size * mi / (std::sqrt(vi) / s.bc2_sqrt + s.eps);
  }
}

namespace {

class Adam final : public WithStateParts<UpdateRuleOptimizer> {
 public:
  Adam(const Hyperparameters& h, bool decoupled)
      : WithStateParts({{"lr", 1e-3},
                        {"beta1", 0.9},
                        {"beta2", 0.999},
                        {"eps", 1e-8},
                        {"weight_decay", decoupled ? 1e-2 : 0.0},
                        {"amsgrad", 0.0}},
                       h),
        decoupled_(decoupled) {
    parts_ = {&exp_avg_, &exp_avg_sq_, &max_exp_avg_sq_, &steps_of_};
    for (const char* b : {"beta1", "beta2"})
      D5_CHECK_ARG(hyper_.at(b) >= 0 && hyper_.at(b) < 1, "{}: {} must be in [0, 1), not {}", name(), b, hyper_.at(b));
    D5_CHECK_ARG(hyper_.at("eps") >= 0, "{}: eps must be >= 0, not {}", name(), hyper_.at("eps"));
  }
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    const double lr = current_learning_rate();
    const double beta1 = hyper_.at("beta1"), beta2 = hyper_.at("beta2"), wd = hyper_.at("weight_decay");
    const double t = (steps_of_[pname] += 1);
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    // Scalars are rounded to float once, as ATen converts a Scalar for a float tensor.
    FusedUpdate u = update_of(UpdateKind::adam, &grad, param);
    u.scalars.adam = AdamScalars{static_cast<float>(beta1),
                         static_cast<float>(beta2),
                         static_cast<float>(1 - beta1),
                         static_cast<float>(1 - beta2),
                         static_cast<float>(hyper_.at("eps")),
                         static_cast<float>(-(lr / bc1)),
                         static_cast<float>(std::sqrt(bc2)),
                         decoupled_ ? 0.f : static_cast<float>(wd),
                         decoupled_ ? static_cast<float>(1 - lr * wd) : 1.f};
    u.state[0] = exp_avg_.get(pname, param);
    u.state[1] = exp_avg_sq_.get(pname, param);
    u.state[2] = hyper_.at("amsgrad") != 0 ? max_exp_avg_sq_.get(pname, param) : nullptr;
    run_update(param.device(), u);
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
