// Element-wise operators on ATen: activations and math functions, Add/Sub/Mul/Div/Pow with
// NumPy (and legacy opset < 7) broadcasting, the variadic Sum/Mean/Max/Min, comparisons and
// logical operators, Where and Cast. A plain forward writes through ATen's out= variants straight
// into the output buffer; the backward replay uses the functional forms, whose autograd formulas
// give the gradients. Where ATen's derivative differs from the reference's documented choice,
// the replay uses a formulation whose derivative is the reference's (Pow's exponent, Max/Min
// ties).
#include <cmath>
#include <limits>

#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// ---- unary ----------------------------------------------------------------------------------

struct UnaryDef {
  const char* type;
  const char* aten;
  Kernel (*make)(const OpSpec&);
};

template <at::Tensor (*F)(const at::Tensor&), at::Tensor& (*FOut)(at::Tensor&, const at::Tensor&)>
Kernel plain(const OpSpec&) {
  return pointwise([](const TensorList& in) { return F(in[0]); },
                   [](at::Tensor& y, const TensorList& in) { return FOut(y, in[0]); });
}

// Clip's bounds: attributes min/max before opset 11, optional one-element inputs 1 and 2 after.
// On integers a bound b acts as trunc(b), which is what clamping in double and truncating gives.
Kernel clip(const OpSpec& s) {
  const bool integral = !is_floating(s.inputs[0].dtype);
  auto bound = [integral](double v) -> c10::optional<at::Scalar> {
    if (std::isinf(v)) return c10::nullopt;
    if (integral) return at::Scalar(static_cast<int64_t>(std::trunc(v)));
    return at::Scalar(v);
  };
  const auto lo_attr = bound(s.attrs.get_float("min", -INFINITY));
  const auto hi_attr = bound(s.attrs.get_float("max", INFINITY));
  return [=](const Call& c) -> TensorList {
    auto lo = lo_attr, hi = hi_attr;
    if (c.in.size() > 1 && c.in[1].defined() && c.in[1].numel() == 1) lo = scalar_of(c.in[1]);
    if (c.in.size() > 2 && c.in[2].defined() && c.in[2].numel() == 1) hi = scalar_of(c.in[2]);
    if (!lo && !hi) return {c.in[0]};
    if (c.writable(0)) {
      at::Tensor y = c.out[0];
      return {at::clamp_out(y, c.in[0], lo, hi)};
    }
    // hardtanh's gradient is zero at the bounds, clamp's passes there: the reference's and oneDNN's
    // is hardtanh's (docs/validation.md, "Gradients at kinks"). With min > max ONNX Clip gives max
    // everywhere (numpy.clip), which clamp computes and hardtanh does not; integers go to clamp too.
    const bool ordered = !lo || !hi || lo->toDouble() <= hi->toDouble();
    if (!integral && ordered)
      return {at::hardtanh(c.in[0], lo ? *lo : at::Scalar(-INFINITY), hi ? *hi : at::Scalar(INFINITY))};
    return {at::clamp(c.in[0], lo, hi)};
  };
}

const UnaryDef kUnary[] = {
    {"Relu", "at::relu",
     [](const OpSpec&) {
       return pointwise([](const TensorList& in) { return at::relu(in[0]); },
                        [](at::Tensor& y, const TensorList& in) { return at::clamp_min_out(y, in[0], 0); });
     }},
    {"LeakyRelu", "at::leaky_relu",
     [](const OpSpec& s) {
       const double a = s.attrs.get_float("alpha", 0.01);
       return pointwise([a](const TensorList& in) { return at::leaky_relu(in[0], a); },
                        [a](at::Tensor& y, const TensorList& in) { return at::leaky_relu_out(y, in[0], a); });
     }},
    {"Sigmoid", "at::sigmoid", plain<at::sigmoid, at::sigmoid_out>},
    {"Tanh", "at::tanh", plain<at::tanh, at::tanh_out>},
    {"Elu", "at::elu",
     [](const OpSpec& s) {
       const double a = s.attrs.get_float("alpha", 1.0);
       return pointwise([a](const TensorList& in) { return at::elu(in[0], a); },
                        [a](at::Tensor& y, const TensorList& in) { return at::elu_out(y, in[0], a); });
     }},
    // SELU with ONNX's alpha and gamma is ELU with scale = gamma (at::selu fixes both).
    {"Selu", "at::elu",
     [](const OpSpec& s) {
       const double a = s.attrs.get_float("alpha", 1.67326319217681884);
       const double g = s.attrs.get_float("gamma", 1.05070102214050293);
       return pointwise([a, g](const TensorList& in) { return at::elu(in[0], a, g); },
                        [a, g](at::Tensor& y, const TensorList& in) { return at::elu_out(y, in[0], a, g); });
     }},
    {"Gelu", "at::gelu",
     [](const OpSpec& s) {
       const std::string approx = s.attrs.get_string("approximate", "none");
       return pointwise(
           [approx](const TensorList& in) { return at::gelu(in[0], approx); },
           [approx](at::Tensor& y, const TensorList& in) { return at::gelu_out(y, in[0], approx); });
     }},
    // Beyond threshold 20 softplus(x) = x to within 2e-9, below every dtype's tolerance here.
    {"Softplus", "at::softplus",
     [](const OpSpec&) {
       return pointwise([](const TensorList& in) { return at::softplus(in[0]); },
                        [](at::Tensor& y, const TensorList& in) { return at::softplus_out(y, in[0]); });
     }},
    // at::hardsigmoid fixes alpha = 1/6; ONNX's default is 0.2. hardtanh's derivative is zero at
    // the bounds, like the reference's.
    {"HardSigmoid", "at::hardtanh",
     [](const OpSpec& s) {
       const double a = s.attrs.get_float("alpha", 0.2), b = s.attrs.get_float("beta", 0.5);
       return pointwise([a, b](const TensorList& in) { return at::hardtanh(in[0] * a + b, 0, 1); },
                        [a, b](at::Tensor& y, const TensorList& in) -> at::Tensor {
                          return at::mul_out(y, in[0], at::Scalar(a)).add_(b).clamp_(0, 1);
                        });
     }},
    {"HardSwish", "at::hardswish", plain<at::hardswish, at::hardswish_out>},
    {"Sqrt", "at::sqrt", plain<at::sqrt, at::sqrt_out>},
    {"Exp", "at::exp", plain<at::exp, at::exp_out>},
    {"Erf", "at::erf", plain<at::erf, at::erf_out>},
    {"Mish", "at::mish", plain<at::mish, at::mish_out>},
    {"Log", "at::log", plain<at::log, at::log_out>},
    {"Neg", "at::neg", plain<at::neg, at::neg_out>},
    {"Abs", "at::abs", plain<at::abs, at::abs_out>},
    {"Reciprocal", "at::reciprocal", plain<at::reciprocal, at::reciprocal_out>},
    {"Clip", "at::hardtanh (at::clamp for integers)", clip},
};

// ---- binary arithmetic ----------------------------------------------------------------------

enum class Arith { add, sub, mul, div, pow };

// Before opset 7, broadcast=1 with 'axis' aligns B's axes at A's axis 'axis': B is read through
// its shape padded with trailing ones.
std::optional<std::vector<int64_t>> legacy_b_shape(const OpSpec& s) {
  if (s.opset >= 7 || s.attrs.get_int("broadcast", 0) == 0 || !s.attrs.has("axis")) return std::nullopt;
  const auto ra = static_cast<int64_t>(s.inputs[0].shape.rank());
  std::vector<int64_t> dims = s.inputs[1].shape.dims();
  dims.resize(static_cast<size_t>(ra - axis_in(s.attrs.get_int("axis"), s.inputs[0].shape.rank())), 1);
  return dims;
}

// Integer division truncating toward zero. x / -1 is computed as -x: INT_MIN / -1 would trap in
// the hardware divide, and negation wraps, as the reference does.
at::Tensor int_div(const at::Tensor& a, const at::Tensor& b) {
  if (!at::isSignedType(a.scalar_type())) return at::div(a, b, "trunc");
  const auto minus_one = b == -1;
  return at::where(minus_one, at::neg(a), at::div(a, at::where(minus_one, at::ones_like(b), b), "trunc"));
}

// ONNX Pow's exponent gradient is a^b ln(a) for a > 0 and 0 for a <= 0 (see the reference);
// ATen's is NaN for a < 0. Writing a^b as exp(b ln a) where a > 0 gives the reference's
// derivative in both operands (at b = 0 the base's is 0, as in ATen).
at::Tensor pow_for_gradient(const at::Tensor& a, const at::Tensor& b) {
  const auto positive = a > 0;
  const auto safe_a = at::where(positive, a, at::ones_like(a));
  return at::where(positive, at::exp(b * at::log(safe_a)), at::pow(a, b.detach()));
}

Built build_arith(const OpSpec& s, Arith kind) {
  const auto b_shape = legacy_b_shape(s);
  const bool floating = is_floating(s.inputs[0].dtype);
  auto operand_b = [b_shape](const TensorList& in) { return b_shape ? in[1].view(*b_shape) : in[1]; };
  switch (kind) {
    case Arith::add:
      return OpDef{pointwise([=](const TensorList& in) { return at::add(in[0], operand_b(in)); },
                             [=](at::Tensor& y, const TensorList& in) {
                               return at::add_out(y, in[0], operand_b(in));
                             }),
                   "at::add"};
    case Arith::sub:
      return OpDef{pointwise([=](const TensorList& in) { return at::sub(in[0], operand_b(in)); },
                             [=](at::Tensor& y, const TensorList& in) {
                               return at::sub_out(y, in[0], operand_b(in));
                             }),
                   "at::sub"};
    case Arith::mul:
      return OpDef{pointwise([=](const TensorList& in) { return at::mul(in[0], operand_b(in)); },
                             [=](at::Tensor& y, const TensorList& in) {
                               return at::mul_out(y, in[0], operand_b(in));
                             }),
                   "at::mul"};
    case Arith::div:
      if (!floating)
        return OpDef{single([=](const TensorList& in) { return int_div(in[0], operand_b(in)); }), "at::div"};
      return OpDef{pointwise([=](const TensorList& in) { return at::div(in[0], operand_b(in)); },
                             [=](at::Tensor& y, const TensorList& in) {
                               return at::div_out(y, in[0], operand_b(in));
                             }),
                   "at::div"};
    case Arith::pow:
      break;
  }
  const bool float_exponent = is_floating(s.inputs[1].dtype);
  const auto base_type = scalar_type(s.inputs[0].dtype);
  return OpDef{[=](const Call& c) -> TensorList {
                 const at::Tensor a = c.in[0], b = operand_b(c.in);
                 if (floating) return {c.replay && float_exponent ? pow_for_gradient(a, b) : at::pow(a, b)};
                 // An integer base: ATen's integer power already truncates negative exponents like
                 // the reference (1, -1 or 0), except that 0 to a negative power is an error there.
                 if (float_exponent) return {at::pow(a.to(at::kDouble), b.to(at::kDouble)).to(base_type)};
                 D5_CHECK_ARG(!at::logical_and(a == 0, b < 0).any().item<bool>(),
                              "{}: 0 raised to a negative power in integer arithmetic", s.label());
                 return {at::pow(a, b)};
               },
               "at::pow"};
}

// ---- variadic -------------------------------------------------------------------------------

enum class Variadic { sum, mean, max, min };

// Max/Min for the backward replay: each element takes the first input attaining the extreme (NaN
// wins), so the whole gradient goes to that input as in the reference; ATen's maximum splits ties.
at::Tensor first_extreme(const TensorList& in, bool max) {
  at::Tensor best = in[0];
  for (size_t k = 1; k < in.size(); ++k) {
    const auto& x = in[k];
    const auto take = at::logical_or(max ? x > best : x < best,
                                     at::logical_and(at::isnan(x), at::isnan(best).logical_not()));
    best = at::where(take, x, best);
  }
  return best;
}

Built build_variadic(const OpSpec& s, Variadic kind) {
  const auto n = static_cast<int64_t>(s.inputs.size());
  if (kind == Variadic::max || kind == Variadic::min) {
    const bool max = kind == Variadic::max;
    return OpDef{[max](const Call& c) -> TensorList {
                   if (c.replay || !c.writable(0)) return {first_extreme(c.in, max)};
                   if (c.in.size() == 1) return {c.in[0]};
                   at::Tensor y = c.out[0];
                   max ? at::maximum_out(y, c.in[0], c.in[1]) : at::minimum_out(y, c.in[0], c.in[1]);
                   for (size_t k = 2; k < c.in.size(); ++k)
                     max ? at::maximum_out(y, y, c.in[k]) : at::minimum_out(y, y, c.in[k]);
                   return {y};
                 },
                 max ? "at::maximum" : "at::minimum"};
  }
  const bool mean = kind == Variadic::mean;
  return OpDef{[mean, n](const Call& c) -> TensorList {
                 if (c.in.size() == 1) return {c.in[0]};
                 if (c.replay || !c.writable(0)) {
                   at::Tensor acc = c.in[0] + c.in[1];
                   for (size_t k = 2; k < c.in.size(); ++k) acc = acc + c.in[k];
                   return {mean ? acc / static_cast<double>(n) : acc};
                 }
                 at::Tensor y = c.out[0];
                 at::add_out(y, c.in[0], c.in[1]);
                 for (size_t k = 2; k < c.in.size(); ++k) at::add_out(y, y, c.in[k]);
                 if (mean) y.div_(static_cast<double>(n));
                 return {y};
               },
               "at::add"};
}

// ---- comparisons and logic ------------------------------------------------------------------

struct LogicDef {
  const char* type;
  const char* aten;
  at::Tensor (*f)(const at::Tensor&, const at::Tensor&);
  at::Tensor& (*f_out)(at::Tensor&, const at::Tensor&, const at::Tensor&);
};

const LogicDef kLogic[] = {
    {"Equal", "at::eq", [](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); },
     [](at::Tensor& y, const at::Tensor& a, const at::Tensor& b) -> at::Tensor& {
       return at::eq_out(y, a, b);
     }},
    {"Less", "at::lt", [](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); },
     [](at::Tensor& y, const at::Tensor& a, const at::Tensor& b) -> at::Tensor& {
       return at::lt_out(y, a, b);
     }},
    {"Greater", "at::gt", [](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); },
     [](at::Tensor& y, const at::Tensor& a, const at::Tensor& b) -> at::Tensor& {
       return at::gt_out(y, a, b);
     }},
    {"LessOrEqual", "at::le", [](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); },
     [](at::Tensor& y, const at::Tensor& a, const at::Tensor& b) -> at::Tensor& {
       return at::le_out(y, a, b);
     }},
    {"GreaterOrEqual", "at::ge", [](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); },
     [](at::Tensor& y, const at::Tensor& a, const at::Tensor& b) -> at::Tensor& {
       return at::ge_out(y, a, b);
     }},
    {"And", "at::logical_and", at::logical_and, at::logical_and_out},
    {"Or", "at::logical_or", at::logical_or, at::logical_or_out},
    {"Xor", "at::logical_xor", at::logical_xor, at::logical_xor_out},
};

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  for (const auto& d : kUnary)
    add_torch_op(
        r, d.type, true,
        [&d](const OpSpec& s, const OpSemantics&) -> Built {
          return OpDef{d.make(s), d.aten};
        },
        "f32, f64 (Relu, Neg, Abs and Clip also integers)");
  const std::pair<const char*, Arith> arith[] = {{"Add", Arith::add},
                                                 {"Sub", Arith::sub},
                                                 {"Mul", Arith::mul},
                                                 {"Div", Arith::div},
                                                 {"Pow", Arith::pow}};
  for (const auto& [type, kind] : arith)
    add_torch_op(
        r, type, true, [kind](const OpSpec& s, const OpSemantics&) { return build_arith(s, kind); },
        "NumPy and legacy (opset < 7) broadcasting; integer Div and Pow follow the reference (wrapping, "
        "truncation)");
  const std::pair<const char*, Variadic> variadic[] = {
      {"Sum", Variadic::sum}, {"Mean", Variadic::mean}, {"Max", Variadic::max}, {"Min", Variadic::min}};
  for (const auto& [type, kind] : variadic)
    add_torch_op(
        r, type, true, [kind](const OpSpec& s, const OpSemantics&) { return build_variadic(s, kind); },
        "gradient of Max/Min goes to the first input attaining the extreme");
  for (const auto& d : kLogic)
    add_torch_op(
        r, d.type, false,
        [&d](const OpSpec&, const OpSemantics&) -> Built {
          return OpDef{
              pointwise([&d](const TensorList& in) { return d.f(in[0], in[1]); },
                        [&d](at::Tensor& y, const TensorList& in) { return d.f_out(y, in[0], in[1]); }),
              d.aten};
        },
        "boolean output, no gradient");
  add_torch_op(
      r, "Not", false,
      [](const OpSpec&, const OpSemantics&) -> Built {
        return OpDef{plain<at::logical_not, at::logical_not_out>(OpSpec{}), "at::logical_not"};
      },
      "boolean output, no gradient");
  add_torch_op(
      r, "Where", true,
      [](const OpSpec&, const OpSemantics&) -> Built {
        return OpDef{pointwise([](const TensorList& in) { return at::where(in[0], in[1], in[2]); },
                               [](at::Tensor& y, const TensorList& in) {
                                 return at::where_out(y, in[0], in[1], in[2]);
                               }),
                     "at::where"};
      },
      "every dtype; gradient for floating X and Y");
  add_torch_op(
      r, "Cast", true,
      [](const OpSpec&, const OpSemantics& ref) -> Built {
        const auto to = scalar_type(ref.outputs[0].dtype);
        return OpDef{pointwise([to](const TensorList& in) { return in[0].to(to); },
                               [](at::Tensor& y, const TensorList& in) { return y.copy_(in[0]); }),
                     "at::_to_copy"};
      },
      "every dtype pair; floats to integers truncate (out-of-range values are not checked, unlike the "
      "reference)");
}

}  // namespace d5::torch_backend
