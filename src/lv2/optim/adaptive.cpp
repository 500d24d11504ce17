// Adagrad and RMSprop as torch.optim:
// adagrad: g = g + wd * p; clr = lr / (1 + (t - 1) * lr_decay); s = s + g * g;
//          p = p - clr * g / (sqrt(s) + eps)
// rmsprop: g = g + wd * p; a = alpha * a + (1 - alpha) * g * g;
//          centered: ga = alpha * ga + (1 - alpha) * g; avg = sqrt(a - ga * ga) + eps, else sqrt(a) + eps;
//          momentum > 0: b = momentum * b + g / avg; p = p - lr * b, else p = p - lr * g / avg
#include "optim_internal.h"

namespace d5::optim {

// ATen's operations: g = g.add(p, wd); sum.addcmul_(g, g, 1); std = sum.sqrt() + eps;
// p.addcdiv_(g, std, -clr).
D5_OPTIM_KERNEL void adagrad_kernel(int64_t b, int64_t e, const float* __restrict g, float* __restrict p,
                                    float* __restrict sum, const AdagradScalars& s) {
  const float neg_clr = s.neg_clr, wd = s.wd, eps = s.eps;
  for (int64_t i = b; i < e; ++i) {
    const float gi = wd != 0 ? madd(g[i], p[i], wd) : g[i];
    const float si = sum[i] + gi * gi;
    sum[i] = si;
    p[i] = p[i] + neg_clr * gi / (std::sqrt(si) + eps);
  }
}

// ATen's operations: g = g.add(p, wd); a.mul_(alpha).addcmul_(g, g, 1 - alpha);
// centered: ga.mul_(alpha).add_(g, 1 - alpha), avg = a.addcmul(ga, ga, -1).sqrt_() + eps, else
// avg = a.sqrt() + eps; momentum: buf.mul_(mu).addcdiv_(g, avg), p.add_(buf, -lr), else
// p.addcdiv_(g, avg, -lr).
D5_OPTIM_KERNEL void rmsprop_kernel(int64_t b, int64_t e, const float* __restrict g, float* __restrict p,
                                    float* __restrict a, float* __restrict ga, float* __restrict buf,
                                    const RmsPropScalars& s) {
  for (int64_t i = b; i < e; ++i) {
    const float gi = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    const float ai = a[i] * s.alpha + s.c * gi * gi;
    a[i] = ai;
    float avg;
    if (ga) {
      const float gai = madd(ga[i] * s.alpha, gi, s.c);
      ga[i] = gai;
      avg = std::sqrt(ai + -1.f * gai * gai) + s.eps;
    } else {
      avg = std::sqrt(ai) + s.eps;
    }
    if (buf) {
      buf[i] = buf[i] * s.mu + 1.f * gi / avg;
      p[i] = madd(p[i], buf[i], s.neg_lr);
    } else {
      p[i] = p[i] + s.neg_lr * gi / avg;
    }
  }
}

namespace {

class Adagrad final : public WithStateParts<UpdateRuleOptimizer> {
 public:
  explicit Adagrad(const Hyperparameters& h)
      : WithStateParts(
            {{"lr", 1e-2}, {"lr_decay", 0.0}, {"weight_decay", 0.0}, {"initial_accumulator_value", 0.0}, {"eps", 1e-10}},
            h) {
    parts_ = {&sum_, &steps_of_};
    D5_CHECK_ARG(hyper_.at("initial_accumulator_value") >= 0, "adagrad: initial_accumulator_value must be >= 0");
  }
  std::string name() const override { return "adagrad"; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    const double t = (steps_of_[pname] += 1);
    const float clr = static_cast<float>(current_learning_rate() / (1 + (t - 1) * hyper_.at("lr_decay")));
    FusedUpdate u = update_of(UpdateKind::adagrad, &grad, param);
    u.scalars.adagrad =
        AdagradScalars{-clr, static_cast<float>(hyper_.at("weight_decay")), static_cast<float>(hyper_.at("eps"))};
    u.state[0] = sum_.get(pname, param, hyper_.at("initial_accumulator_value"));
    run_update(param.device(), u);
  }


 private:
  Buffers sum_{"sum"};
  Scalars steps_of_{"step"};
};

class RmsProp final : public WithStateParts<UpdateRuleOptimizer> {
 public:
  explicit RmsProp(const Hyperparameters& h)
      : WithStateParts(
            {{"lr", 1e-2}, {"alpha", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"momentum", 0.0}, {"centered", 0.0}},
            h) {
    parts_ = {&square_avg_, &grad_avg_, &momentum_, &steps_of_};
    D5_CHECK_ARG(hyper_.at("alpha") >= 0, "rmsprop: alpha must be >= 0, not {}", hyper_.at("alpha"));
    D5_CHECK_ARG(hyper_.at("momentum") >= 0, "rmsprop: momentum must be >= 0, not {}", hyper_.at("momentum"));
  }
  std::string name() const override { return "rmsprop"; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    steps_of_[pname] += 1;
    const float lr = static_cast<float>(current_learning_rate());
    const float alpha = static_cast<float>(hyper_.at("alpha"));
    const float c = static_cast<float>(1 - hyper_.at("alpha"));
    const float wd = static_cast<float>(hyper_.at("weight_decay"));
    const float eps = static_cast<float>(hyper_.at("eps"));
    const float mu = static_cast<float>(hyper_.at("momentum"));
    const bool centered = hyper_.at("centered") != 0;
    FusedUpdate u = update_of(UpdateKind::rmsprop, &grad, param);
    u.scalars.rmsprop = RmsPropScalars{-lr, alpha, c, wd, eps, mu};
    u.state[0] = square_avg_.get(pname, param);
    u.state[1] = centered ? grad_avg_.get(pname, param) : nullptr;
    u.state[2] = mu > 0 ? momentum_.get(pname, param) : nullptr;
    run_update(param.device(), u);
  }


 private:
  Buffers square_avg_{"square_avg"}, grad_avg_{"grad_avg"}, momentum_{"momentum_buffer"};
  Scalars steps_of_{"step"};
};

}  // namespace

std::unique_ptr<Optimizer> make_adagrad(const Hyperparameters& h) { return std::make_unique<Adagrad>(h); }
std::unique_ptr<Optimizer> make_rmsprop(const Hyperparameters& h) { return std::make_unique<RmsProp>(h); }

}  // namespace d5::optim
