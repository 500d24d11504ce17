// L-BFGS as torch.optim.LBFGS, without line search or with its strong-Wolfe one: one step() runs up to max_iter iterations, each
// re-evaluating loss and gradient through the executor, with the two-loop recursion over the last
// history_size (s, y) pairs. The parameters are treated as one flat vector in the order of
// Network::gradient() (sorted names); a parameter without a gradient contributes zeros, as torch's
// _gather_flat_grad does for a missing .grad. Scalars are rounded to float where torch keeps them
// in float tensors, so the iterates follow torch's.
#include <deque>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "optim_internal.h"

namespace d5::optim {

// y = y + a * x rounded once, as ATen's add_(x, alpha).
D5_OPTIM_KERNEL void axpy_kernel(int64_t n, float* __restrict y, const float* __restrict x, float a) {
  for (int64_t i = 0; i < n; ++i) y[i] = madd(y[i], x[i], a);
}

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
void axpy(Vec& y, const Vec& x, double alpha) {  // y.add_(x, alpha): alpha rounded like a float Scalar
  axpy_kernel(static_cast<int64_t>(y.size()), y.data(), x.data(), static_cast<float>(alpha));
}

// The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to the bounds (the
// points' interval when none), or the bounds' midpoint when the cubic has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, double lo, double hi) {
  const double d1 = (g1 + g2) - (3 * (f1 - f2) / (x1 - x2));
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_square);
  const double min_pos = x1 <= x2 ? x2 - ((x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2)))
                                  : x1 - ((x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2)));
  return std::min(std::max(min_pos, lo), hi);
}

struct LineSearchResult {
  double f, t;
  Vec g;
  int64_t evals;
};

// torch.optim.LBFGS's strong-Wolfe line search (bracketing, then zoom by cubic interpolation)
// along d from the current point, where the loss is f, the gradient g and the directional
// derivative gtd. phi(t, g_out) evaluates the loss at x + t d and returns it with the gradient.
LineSearchResult strong_wolfe(const std::function<double(double, Vec&)>& phi, double t, const Vec& d, double f,
                              const Vec& g, double gtd, double tolerance_change) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int max_ls = 25;
  const double d_norm = abs_max(d);
  Vec g_new;
  double f_new = phi(t, g_new);
  int64_t evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Vec g_prev = g;
  bool done = false;
  int ls_iter = 0;
  double bracket[2] = {0, 0}, bracket_f[2] = {0, 0}, bracket_gtd[2] = {0, 0};
  Vec bracket_g[2];
  auto set_bracket = [&](double t0, double f0, const Vec& g0, double gtd0, double t1, double f1, const Vec& g1,
                         double gtd1) {
    bracket[0] = t0, bracket_f[0] = f0, bracket_g[0] = g0, bracket_gtd[0] = gtd0;
    bracket[1] = t1, bracket_f[1] = f1, bracket_g[1] = g1, bracket_gtd[1] = gtd1;
  };
  while (ls_iter < max_ls) {
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
      set_bracket(t_prev, f_prev, g_prev, gtd_prev, t, f_new, g_new, gtd_new);
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      set_bracket(t, f_new, g_new, gtd_new, t, f_new, g_new, gtd_new);
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      set_bracket(t_prev, f_prev, g_prev, gtd_prev, t, f_new, g_new, gtd_new);
      break;
    }
    const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10;
    const double previous = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step);
    t_prev = previous;
    f_prev = f_new;
    g_prev = g_new;
    gtd_prev = gtd_new;
    f_new = phi(t, g_new);
    evals += 1;
    gtd_new = dot(g_new, d);
    ls_iter += 1;
  }
  if (ls_iter == max_ls) set_bracket(0, f, g, gtd, t, f_new, g_new, gtd_new);

  // Zoom: shrink the bracket until a point satisfies the strong Wolfe conditions.
  bool insufficient_progress = false;
  int low = bracket_f[0] <= bracket_f[1] ? 0 : 1, high = 1 - low;
  while (!done && ls_iter < max_ls) {
    t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1],
                          std::min(bracket[0], bracket[1]), std::max(bracket[0], bracket[1]));
    const double bmax = std::max(bracket[0], bracket[1]), bmin = std::min(bracket[0], bracket[1]);
    const double eps = 0.1 * (bmax - bmin);
    if (std::min(bmax - t, t - bmin) < eps) {
      // Close to a boundary: after insufficient progress (or on it), step 0.1 of the bracket in.
      if (insufficient_progress || t >= bmax || t <= bmin) {
        t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    f_new = phi(t, g_new);
    evals += 1;
    gtd_new = dot(g_new, d);
    ls_iter += 1;
    if (f_new > f + c1 * t * gtd || f_new >= bracket_f[low]) {
      bracket[high] = t, bracket_f[high] = f_new, bracket_g[high] = g_new, bracket_gtd[high] = gtd_new;
      low = bracket_f[0] <= bracket_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (bracket[high] - bracket[low]) >= 0) {
        bracket[high] = bracket[low], bracket_f[high] = bracket_f[low], bracket_g[high] = bracket_g[low],
        bracket_gtd[high] = bracket_gtd[low];
      }
      bracket[low] = t, bracket_f[low] = f_new, bracket_g[low] = g_new, bracket_gtd[low] = gtd_new;
    }
    if (std::abs(bracket[1] - bracket[0]) * d_norm < tolerance_change) break;
  }
  return {bracket_f[low], bracket[low], bracket_g[low], evals};
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
                   {"history_size", 100},
                   {"line_search", 0}},  // 1: strong Wolfe
                  h) {
    D5_CHECK_ARG(hyper_.at("max_iter") >= 1, "lbfgs: max_iter must be >= 1, not {}", hyper_.at("max_iter"));
    D5_CHECK_ARG(hyper_.at("history_size") >= 1, "lbfgs: history_size must be >= 1, not {}",
                 hyper_.at("history_size"));
  }
  std::string name() const override { return "lbfgs"; }

  TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss_name) override {
    const double lr = current_learning_rate();
    const int64_t max_iter = static_cast<int64_t>(hyper_.at("max_iter"));
    const int64_t max_eval =
        hyper_.at("max_eval") < 0 ? max_iter * 5 / 4 : static_cast<int64_t>(hyper_.at("max_eval"));
    const double tol_grad = hyper_.at("tolerance_grad"), tol_change = hyper_.at("tolerance_change");
    const bool line_search = hyper_.at("line_search") != 0;
    Evaluation e{executor, feeds, loss_name, executor.network(), executor.network().gradient(), {}};

    Vec flat_grad;
    double loss = evaluate(e, flat_grad);
    int64_t current_evals = 1;
    func_evals_ += 1;
    bool opt_cond = abs_max(flat_grad) <= tol_grad;
    if (opt_cond) {
      count_step();
      return e.outputs;
    }
    for (int64_t n_iter = 1; n_iter <= max_iter; ++n_iter) {
      n_iter_ += 1;
      update_direction(flat_grad);
      prev_flat_grad_ = flat_grad;
      prev_loss_ = loss;
      t_ = n_iter_ == 1 ? std::min(1., 1. / abs_sum(flat_grad)) * lr : lr;
      const double gtd = dot(flat_grad, d_);
      if (gtd > -tol_change) break;
      int64_t ls_evals = 0;
      if (line_search) {
        LineSearchResult ls = search_line(e, loss, flat_grad, gtd, tol_change);
        loss = ls.f;
        t_ = ls.t;
        flat_grad = std::move(ls.g);
        ls_evals = ls.evals;
        add_to_params(e, t_, d_);
        opt_cond = abs_max(flat_grad) <= tol_grad;
      } else if (add_to_params(e, t_, d_); n_iter != max_iter) {
        loss = evaluate(e, flat_grad);
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
    return e.outputs;
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
  // What one step evaluates: the loss and the flattened gradient at the current parameters.
  struct Evaluation {
    GraphExecutor& executor;
    const TensorMap& feeds;
    const std::string& loss_name;
    Network& net;
    std::vector<std::pair<std::string, std::string>> params;  // (parameter, its gradient)
    TensorMap outputs;  // of the first evaluation: what step() returns
  };

  double evaluate(Evaluation& e, Vec& flat_grad) {
    TensorMap out = e.executor.inference_and_backprop(e.feeds, e.loss_name);
    run_gradient_hook(e.net);
    auto it = out.find(e.loss_name);
    D5_CHECK_ARG(it != out.end() && it->second.numel() == 1, "lbfgs: the executor returned no scalar loss '{}'",
                 e.loss_name);
    const double loss = it->second.get(0);
    flat_grad.clear();
    for (const auto& [p, g] : e.params) {
      const Tensor value = e.net.fetch_tensor(p);
      if (!e.net.has_value(g)) {
        flat_grad.resize(flat_grad.size() + static_cast<size_t>(value.numel()), 0.f);
        continue;
      }
      const Tensor grad = e.net.fetch_tensor(g);
      check_f32(name(), p, grad, value);
      const auto s = grad.span<float>();
      flat_grad.insert(flat_grad.end(), s.begin(), s.end());
    }
    if (e.outputs.empty()) e.outputs = std::move(out);
    return loss;
  }

  void add_to_params(Evaluation& e, double t, const Vec& d) {
    const float a = static_cast<float>(t);
    size_t off = 0;
    for (const auto& [p, g] : e.params) {
      Tensor value = e.net.fetch_tensor(p);
      axpy_kernel(value.numel(), value.data_as<float>(), d.data() + off, a);
      off += static_cast<size_t>(value.numel());
    }
  }

  // The new direction d_: steepest descent on the first iteration, else the curvature pair
  // joins the history and the two-loop recursion applies the inverse Hessian estimate.
  void update_direction(const Vec& flat_grad) {
    if (n_iter_ == 1) {
      d_ = flat_grad;
      for (float& v : d_) v = -v;
      h_diag_ = 1;
      old_dirs_.clear();
      old_stps_.clear();
      ro_.clear();
      return;
    }
    Vec y(flat_grad.size()), s(flat_grad.size());
    const float tf = static_cast<float>(t_);
    for (size_t i = 0; i < y.size(); ++i) {
      y[i] = flat_grad[i] - prev_flat_grad_[i];
      s[i] = d_[i] * tf;
    }
    const float ys = static_cast<float>(dot(y, s));
    if (ys > 1e-10) {
      if (old_dirs_.size() == static_cast<size_t>(hyper_.at("history_size"))) {
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

  // Strong Wolfe along d_. Evaluations start from the current parameters, which are put back
  // after each.
  LineSearchResult search_line(Evaluation& e, double loss, const Vec& flat_grad, double gtd, double tol_change) {
    Vec x0;
    for (const auto& [p, g] : e.params) {
      const Tensor value = e.net.fetch_tensor(p);
      const auto v = value.span<float>();
      x0.insert(x0.end(), v.begin(), v.end());
    }
    const auto phi = [&](double t, Vec& g_out) {
      add_to_params(e, t, d_);
      const double f = evaluate(e, g_out);
      size_t off = 0;
      for (const auto& [p, g] : e.params) {
        Tensor value = e.net.fetch_tensor(p);
        std::copy_n(x0.data() + off, value.numel(), value.data_as<float>());
        off += static_cast<size_t>(value.numel());
      }
      return f;
    };
    return strong_wolfe(phi, t_, d_, loss, flat_grad, gtd, tol_change);
  }

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
