#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/op/validation.h"

namespace d5 {

namespace {

struct Tolerances {
  double eps, rtol, atol;
};

Tolerances tolerances_for(DType t, const GradientCheckOptions& o) {
  const bool f64 = t == DType::f64;
  return {o.eps > 0 ? o.eps : (f64 ? 1e-6 : 1e-3), o.rtol > 0 ? o.rtol : (f64 ? 1e-5 : 2e-2),
          o.atol > 0 ? o.atol : (f64 ? 1e-7 : 2e-3)};
}

// L = sum_k <g_k, y_k> over floating-point outputs, in double.
double objective(Operator& op, std::span<const Tensor> inputs, const std::vector<Tensor>& upstream) {
  const auto outs = to_device(op.run_forward(to_device(inputs, op.device())), Device::cpu());
  double l = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!upstream[k].defined()) continue;
    for (int64_t i = 0; i < outs[k].numel(); ++i) l += upstream[k].get(i) * outs[k].get(i);
  }
  return l;
}

// Random upstream gradients for the floating-point outputs (others stay undefined).
std::vector<Tensor> random_upstream(const Operator& op, RngStream& rng) {
  std::vector<Tensor> upstream(op.output_descs().size());
  for (size_t k = 0; k < upstream.size(); ++k) {
    const auto& d = op.output_descs()[k];
    if (!is_floating(d.dtype)) continue;
    upstream[k] = Tensor(d);
    for (int64_t i = 0; i < upstream[k].numel(); ++i) upstream[k].set(i, rng.uniform(-1.0, 1.0));
  }
  return upstream;
}

// Every element of a tensor, or a random sample of `most` of them.
std::vector<int64_t> elements_to_check(int64_t numel, int64_t most, RngStream& rng) {
  std::vector<int64_t> elems(static_cast<size_t>(numel));
  std::iota(elems.begin(), elems.end(), 0);
  if (numel > most) {
    for (size_t j = 0; j < static_cast<size_t>(most); ++j) std::swap(elems[j], elems[j + rng.below(elems.size() - j)]);
    elems.resize(static_cast<size_t>(most));
  }
  return elems;
}

// One element's finite difference against its analytic gradient, folded into the result.
class ElementCheck {
 public:
  ElementCheck(Operator& op, std::vector<Tensor>& inputs, const std::vector<Tensor>& upstream, double l0)
      : op_(op), inputs_(inputs), upstream_(upstream), l0_(l0) {}

  void check(size_t i, int64_t e, double analytic, const Tolerances& tol, GradientCheckResult& res) {
    Tensor& x = inputs_[i];
    const double x0 = x.get(e);
    const double h = tol.eps * std::max(1.0, std::abs(x0));
    const Probe p1 = probe(x, e, x0, h), p2 = probe(x, e, x0, h / 2);
    // Richardson extrapolation cancels the O(h^2) error term of the central difference.
    const double numeric = (4 * p2.central - p1.central) / 3;
    max_grad = std::max({max_grad, std::abs(analytic), std::abs(numeric)});
    // On a smooth function the one-sided slopes differ by ~h f'', halving with h. At a kink
    // (ReLU at 0, a max/pooling tie) they differ by the jump in the derivative at any h; a
    // central difference alone would see the average slope there and report a false failure.
    const double allowed = tol.atol + tol.rtol * std::abs(numeric);
    if (std::abs(p2.jump) > allowed && std::abs(p2.jump) > 0.75 * std::abs(p1.jump)) {
      ++res.non_smooth;
      return;
    }
    ++res.checked;
    const double err = std::abs(analytic - numeric);
    res.max_abs_error = std::max(res.max_abs_error, err);
    res.max_rel_error = std::max(res.max_rel_error, err / std::max(std::abs(numeric), 1e-300));
    if (err - allowed > worst_excess) {
      worst_excess = err - allowed;
      worst = fmt::format("input {} element {}: backward {:.9g}, finite difference {:.9g} (|diff| {:.3g}, "
                          "allowed {:.3g})",
                          i, e, analytic, numeric, err, allowed);
    }
  }

  double max_grad = 0;
  double worst_excess = -INFINITY;
  std::string worst;

 private:
  struct Probe {
    double central, jump;  // central difference; forward minus backward one-sided difference
  };
  Probe probe(Tensor& x, int64_t e, double x0, double h) {
    x.set(e, x0 + h);
    const double hp = x.get(e) - x0;  // the step actually representable in this dtype
    const double lp = objective(op_, inputs_, upstream_);
    x.set(e, x0 - h);
    const double hm = x0 - x.get(e);
    const double lm = objective(op_, inputs_, upstream_);
    x.set(e, x0);
    return Probe{(lp - lm) / (hp + hm), (lp - l0_) / hp - (l0_ - lm) / hm};
  }

  Operator& op_;
  std::vector<Tensor>& inputs_;
  const std::vector<Tensor>& upstream_;
  double l0_;
};

}  // namespace

GradientCheckResult test_gradient(Operator& op, std::span<const Tensor> inputs_in,
                                  const GradientCheckOptions& options) {
  GradientCheckResult res;
  const OpSpec& spec = op.spec();
  if (!op.has_gradient()) {
    res.state = CaseState::Skipped;
    res.detail = fmt::format("{}: {}", spec.label(), op.no_gradient_reason());
    return res;
  }
  // Work on copies: perturbing must never touch the caller's tensors.
  std::vector<Tensor> inputs;
  for (const auto& t : inputs_in) inputs.push_back(t.defined() ? t.clone() : Tensor());

  RngStream rng(options.seed, "gradient_check/" + spec.type);
  const std::vector<Tensor> upstream = random_upstream(op, rng);
  // The operator works on its device; the check reads host copies.
  const auto op_inputs = to_device(inputs, op.device());
  const auto outputs = op.run_forward(op_inputs);
  const auto analytic =
      to_device(op.run_backward(to_device(upstream, op.device()), op_inputs, outputs), Device::cpu());
  const auto mask = op.differentiable_inputs();
  ElementCheck checker(op, inputs, upstream, objective(op, inputs, upstream));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i >= mask.size() || !mask[i] || !inputs[i].defined()) continue;
    D5_CHECK_ARG(is_floating(inputs[i].dtype()), "{}: input {} is marked differentiable but is {}", spec.label(), i,
                 to_string(inputs[i].dtype()));
    D5_CHECK(analytic[i].defined(), Internal, "{}: backward left the gradient of input {} undefined",
             spec.label(), i);
    const Tolerances tol = tolerances_for(inputs[i].dtype(), options);
    for (int64_t e : elements_to_check(inputs[i].numel(), options.max_elements_per_input, rng))
      checker.check(i, e, analytic[i].get(e), tol, res);
  }

  if (res.checked == 0) {
    res.state = CaseState::Mistrusted;
    res.detail = fmt::format("{}: every checked element sat on a non-smooth point ({} skipped)", spec.label(),
                             res.non_smooth);
  } else if (checker.worst_excess > 0) {
    res.state = CaseState::Failed;
    res.detail = fmt::format("{}: {}", spec.label(), checker.worst);
  } else if (checker.max_grad < 1e-12) {
    res.state = CaseState::Mistrusted;
    res.detail = fmt::format("{}: all gradients are zero; the check has no power on these inputs", spec.label());
  } else {
    res.state = CaseState::Passed;
    res.detail = fmt::format("{} elements checked, {} non-smooth skipped; worst {}", res.checked, res.non_smooth,
                             checker.worst);
  }
  return res;
}

}  // namespace d5
