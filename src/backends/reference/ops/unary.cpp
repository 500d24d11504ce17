// Unary element-wise operators: activations and math functions, forward and backward.
// Each is a pair (f, df) over doubles; the kernel runs them in the tensor's dtype.
#include <cmath>
#include <numbers>

#include "../ref_common.h"

namespace d5::reference {

namespace {

struct Params {
  double alpha = 0, beta = 0, gamma = 0;
  bool tanh_approx = false;  // Gelu
  double lo = -INFINITY, hi = INFINITY;  // Clip
};

using Fn = double (*)(double x, const Params& p);
using DFn = double (*)(double x, double y, const Params& p);  // dy/dx given x and y = f(x)

struct UnaryDef {
  const char* type;
  Fn f;
  DFn df;             // nullptr: no gradient
  bool integers;      // also defined on integer dtypes
  void (*parse)(const OpSpec&, Params&);
};

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)

double gelu(double x, const Params& p) {
  if (p.tanh_approx) return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
}
double gelu_grad(double x, double, const Params& p) {
  if (p.tanh_approx) {
    const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    const double t = std::tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
  }
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return 0.5 * (1 + std::erf(x / std::numbers::sqrt2)) + x * pdf;
}

// log(1 + e^x) without overflow for large x.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

void no_params(const OpSpec&, Params&) {}
void alpha_param(const OpSpec& s, Params& p, double def) { p.alpha = s.attrs.get_float("alpha", def); }

const UnaryDef kDefs[] = {
    {"Relu", [](double x, const Params&) { return x > 0 ? x : 0.0; },
     [](double x, double, const Params&) { return x > 0 ? 1.0 : 0.0; }, true, no_params},
    {"LeakyRelu", [](double x, const Params& p) { return x >= 0 ? x : p.alpha * x; },
     [](double x, double, const Params& p) { return x > 0 ? 1.0 : p.alpha; }, false,
     [](const OpSpec& s, Params& p) { alpha_param(s, p, 0.01); }},
    {"Sigmoid", [](double x, const Params&) { return 1 / (1 + std::exp(-x)); },
     [](double, double y, const Params&) { return y * (1 - y); }, false, no_params},
    {"Tanh", [](double x, const Params&) { return std::tanh(x); },
     [](double, double y, const Params&) { return 1 - y * y; }, false, no_params},
    {"Elu", [](double x, const Params& p) { return x >= 0 ? x : p.alpha * (std::exp(x) - 1); },
     [](double x, double y, const Params& p) { return x > 0 ? 1.0 : y + p.alpha; }, false,
     [](const OpSpec& s, Params& p) { alpha_param(s, p, 1.0); }},
    {"Selu",
     [](double x, const Params& p) { return p.gamma * (x > 0 ? x : p.alpha * (std::exp(x) - 1)); },
     [](double x, double, const Params& p) { return p.gamma * (x > 0 ? 1.0 : p.alpha * std::exp(x)); }, false,
     [](const OpSpec& s, Params& p) {
       p.alpha = s.attrs.get_float("alpha", 1.67326319217681884);
       p.gamma = s.attrs.get_float("gamma", 1.05070102214050293);
     }},
    {"Gelu", gelu, gelu_grad, false,
     [](const OpSpec& s, Params& p) {
       const auto a = s.attrs.get_string("approximate", "none");
       D5_CHECK_ARG(a == "none" || a == "tanh", "{}: approximate='{}' must be 'none' or 'tanh'", s.label(), a);
       p.tanh_approx = a == "tanh";
     }},
    {"Softplus", [](double x, const Params&) { return softplus(x); },
     [](double x, double, const Params&) { return 1 / (1 + std::exp(-x)); }, false, no_params},
    // erf'(x) = 2/sqrt(pi) exp(-x^2).
    {"Erf", [](double x, const Params&) { return std::erf(x); },
     [](double x, double, const Params&) { return 2 / std::sqrt(std::numbers::pi) * std::exp(-x * x); }, false,
     no_params},
    // Mish(x) = x tanh(softplus(x)); with t = tanh(softplus(x)) and softplus' = sigmoid:
    // Mish'(x) = t + x (1 - t^2) sigmoid(x).
    {"Mish", [](double x, const Params&) { return x * std::tanh(softplus(x)); },
     [](double x, double, const Params&) {
       const double t = std::tanh(softplus(x));
       return t + x * (1 - t * t) / (1 + std::exp(-x));
     },
     false, no_params},
    {"HardSigmoid", [](double x, const Params& p) { return std::clamp(p.alpha * x + p.beta, 0.0, 1.0); },
     [](double x, double, const Params& p) {
       const double v = p.alpha * x + p.beta;
       return v > 0 && v < 1 ? p.alpha : 0.0;
     },
     false,
     [](const OpSpec& s, Params& p) {
       p.alpha = s.attrs.get_float("alpha", 0.2);
       p.beta = s.attrs.get_float("beta", 0.5);
     }},
    {"HardSwish", [](double x, const Params&) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); },
     [](double x, double, const Params&) { return x <= -3 ? 0.0 : x >= 3 ? 1.0 : x / 3 + 0.5; }, false,
     no_params},
    {"Sqrt", [](double x, const Params&) { return std::sqrt(x); },
     [](double, double y, const Params&) { return 0.5 / y; }, false, no_params},
    {"Exp", [](double x, const Params&) { return std::exp(x); }, [](double, double y, const Params&) { return y; },
     false, no_params},
    {"Log", [](double x, const Params&) { return std::log(x); },
     [](double x, double, const Params&) { return 1 / x; }, false, no_params},
    {"Neg", [](double x, const Params&) { return -x; }, [](double, double, const Params&) { return -1.0; }, true,
     no_params},
    {"Abs", [](double x, const Params&) { return std::abs(x); },
     [](double x, double, const Params&) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, true, no_params},
    {"Reciprocal", [](double x, const Params&) { return 1 / x; },
     [](double, double y, const Params&) { return -y * y; }, false, no_params},
    {"Clip", [](double x, const Params& p) { return std::min(std::max(x, p.lo), p.hi); },
     // Zero at the bounds, as for Relu at 0 (Clip(0, inf) is Relu, and ReLU6 exports as Clip(0, 6)),
     // PyTorch's hardtanh and oneDNN's clip_v2 (docs/validation.md, "Gradients at kinks").
     [](double x, double, const Params& p) { return x > p.lo && x < p.hi ? 1.0 : 0.0; }, true,
     [](const OpSpec& s, Params& p) {  // opset < 11: min/max attributes; later: inputs 1 and 2
       p.lo = s.attrs.get_float("min", -INFINITY);
       p.hi = s.attrs.get_float("max", INFINITY);
     }},
};

class UnaryOp : public ReferenceOp {
 public:
  UnaryOp(const OpSpec& spec, const UnaryDef& def)
      : ReferenceOp(spec, {spec.inputs.at(0)}), def_(def) {
    def.parse(spec, params_);
    const DType t = spec.inputs[0].dtype;
    D5_CHECK_ARG(is_floating(t) || def.integers, "{}: dtype {} is not supported (floating point only)",
                 spec.label(), to_string(t));
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    Params p = clip_bounds(in);
    run<false>(in[0], Tensor(), out[0], p);
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!def_.df) return {};
    std::vector<bool> m(spec_.inputs.size(), false);
    m[0] = true;
    return m;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    Params p = clip_bounds(in);
    if (!gy[0].defined()) {
      gx[0].fill(0);
      return;
    }
    // gx = gy * f'(x, y): the kernel reads x and y, and writes into gx.
    run<true>(in[0], out[0], gx[0], p, &gy[0]);
  }

  double flops() const override { return static_cast<double>(spec_.inputs[0].numel()); }

 private:
  Params clip_bounds(std::span<const Tensor> in) const {
    Params p = params_;
    if (std::string_view(def_.type) == "Clip") {
      if (in.size() > 1 && spec_.has_input(1) && in[1].defined() && in[1].numel() == 1) p.lo = in[1].get(0);
      if (in.size() > 2 && spec_.has_input(2) && in[2].defined() && in[2].numel() == 1) p.hi = in[2].get(0);
    }
    return p;
  }

  template <bool Grad>
  void run(const Tensor& x, const Tensor& y, Tensor& dst, const Params& p, const Tensor* gy = nullptr) {
    dispatch<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t>(x.dtype(), spec_, [&]<typename T>() {
      const T* xs = x.data_as<T>();
      T* d = dst.data_as<T>();
      const int64_t n = x.numel();
      if constexpr (Grad) {
        const T* ys = y.data_as<T>();
        const T* g = gy->data_as<T>();
        for (int64_t i = 0; i < n; ++i)
          d[i] = static_cast<T>(static_cast<double>(g[i]) *
                                def_.df(static_cast<double>(xs[i]), static_cast<double>(ys[i]), p));
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(def_.f(static_cast<double>(xs[i]), p));
      }
    });
  }

  const UnaryDef& def_;
  Params params_;
};

}  // namespace

void register_unary_ops(OpRegistry& r) {
  for (const auto& def : kDefs)
    add_op(r, def.type, def.df != nullptr, [&def](const OpSpec& s) -> OpCreateResult {
      D5_CHECK_ARG(!s.inputs.empty(), "{}: needs one input", s.label());
      return std::make_unique<UnaryOp>(s, def);
    });
}

}  // namespace d5::reference
