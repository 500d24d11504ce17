// SGD with momentum, dampening, Nesterov momentum and weight decay: torch.optim.SGD's update.
//   d = g + wd * p
//   v = d on the first step, else mu * v + (1 - dampening) * d
//   d = d + mu * v (nesterov) or v
//   p = p - lr * d
#include "optim_internal.h"

namespace d5::optim {

// ATen's operations: d = g.add(p, wd); buf.mul_(mu).add_(d, 1 - dampening); d.add(buf, mu);
// p.add_(d, -lr).
D5_OPTIM_KERNEL void sgd_kernel(int64_t b, int64_t e, const float* __restrict g, float* __restrict p,
                                float* __restrict v, const SgdScalars& s) {
  if (!v) {
    for (int64_t i = b; i < e; ++i) p[i] = madd(p[i], s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i], s.neg_lr);
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    float d = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    const float vi = s.first ? d : madd(v[i] * s.mu, d, s.damp);
    v[i] = vi;
    d = s.nesterov ? madd(d, vi, s.mu) : vi;
    p[i] = madd(p[i], d, s.neg_lr);
  }
}

namespace {

class Sgd final : public WithStateParts<UpdateRuleOptimizer> {
 public:
  Sgd(const Hyperparameters& h, std::string variant)
      : WithStateParts({{"lr", 1e-3},
                        {"momentum", variant == "sgd" ? 0.0 : 0.9},
                        {"dampening", 0.0},
                        {"weight_decay", 0.0}},
                       h),
        name_(std::move(variant)) {
    parts_ = {&momentum_};
    const double mu = hyper_.at("momentum");
    D5_CHECK_ARG(mu >= 0, "{}: momentum must be >= 0, not {}", name_, mu);
    D5_CHECK_ARG(name_ != "nesterov" || (mu > 0 && hyper_.at("dampening") == 0),
                 "nesterov: Nesterov momentum needs momentum > 0 and dampening = 0 (as torch.optim.SGD)");
  }
  std::string name() const override { return name_; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name_, pname, grad, param);
    const double mu = hyper_.at("momentum");
    FusedUpdate u = update_of(UpdateKind::sgd, &grad, param);
    u.scalars.sgd = SgdScalars{static_cast<float>(-current_learning_rate()),
                               static_cast<float>(hyper_.at("weight_decay")),
                               static_cast<float>(mu),
                               static_cast<float>(1.0 - hyper_.at("dampening")),
                               name_ == "nesterov",
                               mu != 0 && !momentum_.has(pname)};
    u.state[0] = mu != 0 ? momentum_.get(pname, param) : nullptr;
    run_update(param.device(), u);
  }

 private:
  std::string name_;
  Buffers momentum_{"momentum_buffer"};
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const Hyperparameters& h, const std::string& variant) {
  return std::make_unique<Sgd>(h, variant);
}

}  // namespace d5::optim
