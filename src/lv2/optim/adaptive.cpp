// Adagrad and RMSprop as torch.optim:
// adagrad: g = g + wd * p; clr = lr / (1 + (t - 1) * lr_decay); s = s + g * g;
//          p = p - clr * g / (sqrt(s) + eps)
// rmsprop: g = g + wd * p; a = alpha * a + (1 - alpha) * g * g;
//          centered: ga = alpha * ga + (1 - alpha) * g; avg = sqrt(a - ga * ga) + eps, else sqrt(a) + eps;
//          momentum > 0: b = momentum * b + g / avg; p = p - lr * b, else p = p - lr * g / avg
#include "optim_internal.h"

namespace d5::optim {
namespace {

class Adagrad final : public UpdateRuleOptimizer {
 public:
  explicit Adagrad(const Hyperparameters& h)
      : UpdateRuleOptimizer(
            {{"lr", 1e-2}, {"lr_decay", 0.0}, {"weight_decay", 0.0}, {"initial_accumulator_value", 0.0}, {"eps", 1e-10}},
            h) {
    D5_CHECK_ARG(hyper_.at("initial_accumulator_value") >= 0, "adagrad: initial_accumulator_value must be >= 0");
  }
  std::string name() const override { return "adagrad"; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name(), pname, grad, param);
    const double t = (steps_of_[pname] += 1);
    const float clr = static_cast<float>(current_learning_rate() / (1 + (t - 1) * hyper_.at("lr_decay")));
    const float wd = static_cast<float>(hyper_.at("weight_decay"));
    const float eps = static_cast<float>(hyper_.at("eps"));
    const float* __restrict g = grad.data_as<float>();
    float* __restrict p = param.data_as<float>();
    float* __restrict s = sum_.get(pname, param, hyper_.at("initial_accumulator_value"));
    for_chunks(param.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float gi = wd != 0 ? g[i] + wd * p[i] : g[i];
        const float si = s[i] + gi * gi;
        s[i] = si;
        p[i] = p[i] - clr * (gi / (std::sqrt(si) + eps));
      }
    });
  }

  OptimizerState state() const override {
    OptimizerState s = UpdateRuleOptimizer::state();
    sum_.save(s);
    steps_of_.save(s);
    return s;
  }
  void load_state(const OptimizerState& s) override {
    UpdateRuleOptimizer::load_state(s);
    sum_.load(s);
    steps_of_.load(s);
  }

 private:
  Buffers sum_{"sum"};
  Scalars steps_of_{"step"};
};

class RmsProp final : public UpdateRuleOptimizer {
 public:
  explicit RmsProp(const Hyperparameters& h)
      : UpdateRuleOptimizer(
            {{"lr", 1e-2}, {"alpha", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"momentum", 0.0}, {"centered", 0.0}},
            h) {
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
    const float* __restrict g = grad.data_as<float>();
    float* __restrict p = param.data_as<float>();
    float* __restrict a = square_avg_.get(pname, param);
    float* __restrict ga = centered ? grad_avg_.get(pname, param) : nullptr;
    float* __restrict buf = mu > 0 ? momentum_.get(pname, param) : nullptr;
    for_chunks(param.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float gi = wd != 0 ? g[i] + wd * p[i] : g[i];
        const float ai = a[i] * alpha + c * (gi * gi);
        a[i] = ai;
        float avg;
        if (centered) {
          const float gai = ga[i] * alpha + c * gi;
          ga[i] = gai;
          avg = std::sqrt(ai - gai * gai) + eps;
        } else {
          avg = std::sqrt(ai) + eps;
        }
        if (buf) {
          buf[i] = buf[i] * mu + gi / avg;
          p[i] = p[i] - lr * buf[i];
        } else {
          p[i] = p[i] - lr * (gi / avg);
        }
      }
    });
  }

  OptimizerState state() const override {
    OptimizerState s = UpdateRuleOptimizer::state();
    square_avg_.save(s);
    grad_avg_.save(s);
    momentum_.save(s);
    steps_of_.save(s);
    return s;
  }
  void load_state(const OptimizerState& s) override {
    UpdateRuleOptimizer::load_state(s);
    square_avg_.load(s);
    grad_avg_.load(s);
    momentum_.load(s);
    steps_of_.load(s);
  }

 private:
  Buffers square_avg_{"square_avg"}, grad_avg_{"grad_avg"}, momentum_{"momentum_buffer"};
  Scalars steps_of_{"step"};
};

}  // namespace

std::unique_ptr<Optimizer> make_adagrad(const Hyperparameters& h) { return std::make_unique<Adagrad>(h); }
std::unique_ptr<Optimizer> make_rmsprop(const Hyperparameters& h) { return std::make_unique<RmsProp>(h); }

}  // namespace d5::optim
