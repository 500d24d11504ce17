// L-BFGS as torch.optim.LBFGS without line search: one step() runs up to max_iter iterations, each
// re-evaluating loss and gradient through the executor, with the two-loop recursion over the last
// history_size (s, y) pairs. The parameters are treated as one flat vector in the order of
// Network::gradient() (sorted names); a parameter without a gradient contributes zeros, as torch's
// _gather_flat_grad does for a missing .grad. Scalars are rounded to float where torch keeps them
// in float tensors, so the iterates follow torch's.
#include <deque>
#include <numeric>

#include <fmt/format.h>

#include "optim_internal.h"

namespace d5::optim {
namespace {

using Vec = std::vector<float>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}
double abs_max(const Vec& a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::abs(v));
  return m;
}
double abs_sum(const Vec& a) {
  double s = 0;
  for (float v : a) s += std::abs(v);
  return static_cast<float>(s);
}
void axpy(Vec& y, const Vec& x, double alpha) {  // y += alpha * x, alpha rounded like a float Scalar
  const float a = static_cast<float>(alpha);
  for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] + a * x[i];
}

Tensor vec_tensor(const Vec& v) {
  Tensor t(DType::f32, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}
Vec tensor_vec(const Tensor& t) {
  D5_CHECK_ARG(t.dtype() == DType::f32, "lbfgs: state vectors are float32, not {}", t.desc().to_string());
  const auto s = t.span<float>();
  return Vec(s.begin(), s.end());
}

class Lbfgs final : public Optimizer {
 public:
  explicit Lbfgs(const Hyperparameters& h)
      : Optimizer({{"lr", 1.0},
                   {"max_iter", 20},
                   {"max_eval", -1},  // -1: max_iter * 5 / 4, torch's default
                   {"tolerance_grad", 1e-7},
                   {"tolerance_change", 1e-9},
                   {"history_size", 100}},
                  h) {
    D5_CHECK_ARG(hyper_.at("max_iter") >= 1, "lbfgs: max_iter must be >= 1, not {}", hyper_.at("max_iter"));
    D5_CHECK_ARG(hyper_.at("history_size") >= 1, "lbfgs: history_size must be >= 1, not {}",
                 hyper_.at("history_size"));
  }
  std::string name() const override { return "lbfgs"; }

  TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss_name) override {
    Network& net = executor.network();
    const double lr = current_learning_rate();
    const int64_t max_iter = static_cast<int64_t>(hyper_.at("max_iter"));
    const int64_t max_eval =
        hyper_.at("max_eval") < 0 ? max_iter * 5 / 4 : static_cast<int64_t>(hyper_.at("max_eval"));
    const double tol_grad = hyper_.at("tolerance_grad"), tol_change = hyper_.at("tolerance_change");
    const size_t history = static_cast<size_t>(hyper_.at("history_size"));
    const auto params = net.gradient();

    TensorMap outputs;
    auto evaluate = [&](Vec& flat_grad) {
      TensorMap out = executor.inference_and_backprop(feeds, loss_name);
      run_gradient_hook(net);
      auto it = out.find(loss_name);
      D5_CHECK_ARG(it != out.end() && it->second.numel() == 1, "lbfgs: the executor returned no scalar loss '{}'",
                   loss_name);
      const double loss = it->second.get(0);
      flat_grad.clear();
      for (const auto& [p, g] : params) {
        const Tensor value = net.fetch_tensor(p);
        if (!net.has_value(g)) {
          flat_grad.resize(flat_grad.size() + static_cast<size_t>(value.numel()), 0.f);
          continue;
        }
        const Tensor grad = net.fetch_tensor(g);
        check_f32(name(), p, grad, value);
        const auto s = grad.span<float>();
        flat_grad.insert(flat_grad.end(), s.begin(), s.end());
      }
      if (outputs.empty()) outputs = std::move(out);
      return loss;
    };
    auto add_to_params = [&](double t, const Vec& d) {
      const float a = static_cast<float>(t);
      size_t off = 0;
      for (const auto& [p, g] : params) {
        Tensor value = net.fetch_tensor(p);
        float* x = value.data_as<float>();
        for (int64_t i = 0; i < value.numel(); ++i) x[i] = x[i] + a * d[off + static_cast<size_t>(i)];
        off += static_cast<size_t>(value.numel());
      }
    };

    Vec flat_grad;
    double loss = evaluate(flat_grad);
    int64_t current_evals = 1;
    func_evals_ += 1;
    bool opt_cond = abs_max(flat_grad) <= tol_grad;
    if (opt_cond) {
      count_step();
      return outputs;
    }
    for (int64_t n_iter = 1; n_iter <= max_iter; ++n_iter) {
      n_iter_ += 1;
      if (n_iter_ == 1) {
        d_ = flat_grad;
        for (float& v : d_) v = -v;
        h_diag_ = 1;
        old_dirs_.clear();
        old_stps_.clear();
        ro_.clear();
      } else {
        Vec y(flat_grad.size()), s(flat_grad.size());
        const float tf = static_cast<float>(t_);
        for (size_t i = 0; i < y.size(); ++i) {
          y[i] = flat_grad[i] - prev_flat_grad_[i];
          s[i] = d_[i] * tf;
        }
        const float ys = static_cast<float>(dot(y, s));
        if (ys > 1e-10) {
          if (old_dirs_.size() == history) {
            old_dirs_.pop_front();
            old_stps_.pop_front();
            ro_.pop_front();
          }
          h_diag_ = ys / static_cast<float>(dot(y, y));
          old_dirs_.push_back(std::move(y));
          old_stps_.push_back(std::move(s));
          ro_.push_back(1.f / ys);
        }
        const size_t num_old = old_dirs_.size();
        std::vector<float> al(num_old);
        Vec q = flat_grad;
        for (float& v : q) v = -v;
        for (size_t k = num_old; k-- > 0;) {
          al[k] = static_cast<float>(dot(old_stps_[k], q)) * ro_[k];
          axpy(q, old_dirs_[k], -static_cast<double>(al[k]));
        }
        for (float& v : q) v = v * h_diag_;
        for (size_t k = 0; k < num_old; ++k) {
          const float be = static_cast<float>(dot(old_dirs_[k], q)) * ro_[k];
          axpy(q, old_stps_[k], static_cast<double>(al[k] - be));
        }
        d_ = std::move(q);
      }
      prev_flat_grad_ = flat_grad;
      prev_loss_ = loss;
      t_ = n_iter_ == 1 ? std::min(1., 1. / abs_sum(flat_grad)) * lr : lr;
      const double gtd = dot(flat_grad, d_);
      if (gtd > -tol_change) break;
      int64_t ls_evals = 0;
      add_to_params(t_, d_);
      if (n_iter != max_iter) {
        loss = evaluate(flat_grad);
        opt_cond = abs_max(flat_grad) <= tol_grad;
        ls_evals = 1;
      }
      current_evals += ls_evals;
      func_evals_ += ls_evals;
      if (n_iter == max_iter || current_evals >= max_eval || opt_cond) break;
      double dmax = 0;
      for (float v : d_) dmax = std::max(dmax, static_cast<double>(std::abs(v * static_cast<float>(t_))));
      if (dmax <= tol_change) break;
      if (std::abs(loss - prev_loss_) < tol_change) break;
    }
    count_step();
    return outputs;
  }

  OptimizerState state() const override {
    OptimizerState s = Optimizer::state();
    s["lbfgs/n_iter"] = scalar_tensor(static_cast<double>(n_iter_));
    s["lbfgs/func_evals"] = scalar_tensor(static_cast<double>(func_evals_));
    s["lbfgs/t"] = scalar_tensor(t_);
    s["lbfgs/H_diag"] = scalar_tensor(h_diag_);
    s["lbfgs/prev_loss"] = scalar_tensor(prev_loss_);
    s["lbfgs/d"] = vec_tensor(d_);
    s["lbfgs/prev_flat_grad"] = vec_tensor(prev_flat_grad_);
    for (size_t k = 0; k < old_dirs_.size(); ++k) {
      s[fmt::format("lbfgs/old_dirs/{}", k)] = vec_tensor(old_dirs_[k]);
      s[fmt::format("lbfgs/old_stps/{}", k)] = vec_tensor(old_stps_[k]);
      s[fmt::format("lbfgs/ro/{}", k)] = scalar_tensor(ro_[k]);
    }
    return s;
  }
  void load_state(const OptimizerState& s) override {
    Optimizer::load_state(s);
    n_iter_ = static_cast<int64_t>(scalar_of(s, "lbfgs/n_iter", name()));
    func_evals_ = static_cast<int64_t>(scalar_of(s, "lbfgs/func_evals", name()));
    t_ = scalar_of(s, "lbfgs/t", name());
    h_diag_ = static_cast<float>(scalar_of(s, "lbfgs/H_diag", name()));
    prev_loss_ = scalar_of(s, "lbfgs/prev_loss", name());
    d_ = tensor_vec(state_entry(s, "lbfgs/d", name()));
    prev_flat_grad_ = tensor_vec(state_entry(s, "lbfgs/prev_flat_grad", name()));
    old_dirs_.clear();
    old_stps_.clear();
    ro_.clear();
    for (size_t k = 0; s.count(fmt::format("lbfgs/old_dirs/{}", k)); ++k) {
      old_dirs_.push_back(tensor_vec(state_entry(s, fmt::format("lbfgs/old_dirs/{}", k), name())));
      old_stps_.push_back(tensor_vec(state_entry(s, fmt::format("lbfgs/old_stps/{}", k), name())));
      ro_.push_back(static_cast<float>(scalar_of(s, fmt::format("lbfgs/ro/{}", k), name())));
    }
  }

 private:
  int64_t n_iter_ = 0, func_evals_ = 0;
  double t_ = 0, prev_loss_ = 0;
  float h_diag_ = 1;
  Vec d_, prev_flat_grad_;
  std::deque<Vec> old_dirs_, old_stps_;
  std::deque<float> ro_;
};

}  // namespace

std::unique_ptr<Optimizer> make_lbfgs(const Hyperparameters& h) { return std::make_unique<Lbfgs>(h); }

}  // namespace d5::optim
