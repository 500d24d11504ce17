// SGD with momentum, dampening, Nesterov momentum and weight decay: torch.optim.SGD's update.
//   d = g + wd * p
//   v = d on the first step, else mu * v + (1 - dampening) * d
//   d = d + mu * v (nesterov) or v
//   p = p - lr * d
#include "optim_internal.h"

namespace d5::optim {
namespace {

class Sgd final : public UpdateRuleOptimizer {
 public:
  Sgd(const Hyperparameters& h, std::string variant)
      : UpdateRuleOptimizer({{"lr", 1e-3},
                             {"momentum", variant == "sgd" ? 0.0 : 0.9},
                             {"dampening", 0.0},
                             {"weight_decay", 0.0}},
                            h),
        name_(std::move(variant)) {
    const double mu = hyper_.at("momentum");
    D5_CHECK_ARG(mu >= 0, "{}: momentum must be >= 0, not {}", name_, mu);
    D5_CHECK_ARG(name_ != "nesterov" || (mu > 0 && hyper_.at("dampening") == 0),
                 "nesterov: Nesterov momentum needs momentum > 0 and dampening = 0 (as torch.optim.SGD)");
  }
  std::string name() const override { return name_; }

  void update_rule(const Tensor& grad, Tensor& param, const std::string& pname) override {
    check_f32(name_, pname, grad, param);
    const float lr = static_cast<float>(current_learning_rate());
    const float wd = static_cast<float>(hyper_.at("weight_decay"));
    const float mu = static_cast<float>(hyper_.at("momentum"));
    const float damp = static_cast<float>(1.0 - hyper_.at("dampening"));
    const bool nesterov = name_ == "nesterov";
    const float* __restrict g = grad.data_as<float>();
    float* __restrict p = param.data_as<float>();
    const int64_t n = param.numel();
    if (mu == 0) {
      for_chunks(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float d = wd != 0 ? g[i] + wd * p[i] : g[i];
          p[i] = p[i] - lr * d;
        }
      });
      return;
    }
    const bool first = !momentum_.has(pname);
    float* __restrict v = momentum_.get(pname, param);
    for_chunks(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float d = wd != 0 ? g[i] + wd * p[i] : g[i];
        const float vi = first ? d : v[i] * mu + damp * d;
        v[i] = vi;
        d = nesterov ? d + mu * vi : vi;
        p[i] = p[i] - lr * d;
      }
    });
  }

  OptimizerState state() const override {
    OptimizerState s = UpdateRuleOptimizer::state();
    momentum_.save(s);
    return s;
  }
  void load_state(const OptimizerState& s) override {
    UpdateRuleOptimizer::load_state(s);
    momentum_.load(s);
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
