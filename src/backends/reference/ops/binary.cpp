// Binary arithmetic with multidirectional (NumPy) broadcasting: Add, Sub, Mul, Div, Pow.
//
// Integers follow ONNX Runtime and NumPy: Add/Sub/Mul wrap on overflow, Div truncates toward zero
// (C semantics; INT_MIN / -1 wraps to INT_MIN) and refuses division by zero. Pow's output has the
// base's dtype; an integer base with an integer exponent is computed exactly (wrapping), a negative
// exponent truncates the real result (2^-1 = 0, (-1)^-3 = -1; 0^-1 is refused), and a floating
// exponent truncates pow(double, double) after checking the result fits.
//
// Gradients (floating base only), each summed back over the axes the input was broadcast along:
//   Add: g, g   Sub: g, -g   Mul: g b, g a   Div: g / b, -g a / b^2
//   Pow: d/da = b a^(b-1), taken as 0 where b = 0 (a^0 = 1 is constant, PyTorch does the same);
//        d/db = a^b ln(a) for a > 0 and 0 for a <= 0: at a = 0, a^b is identically 0 for b > 0,
//        and for a < 0, a^b is real only at integer b, so no derivative in b exists (PyTorch
//        returns NaN there; a zero keeps a trainable exponent from poisoning training).
//        The exponent gets a gradient only when it is floating point.
#include "elementwise.h"

namespace d5::reference {

namespace {

enum class Arith { add, sub, mul, div, pow };

template <typename T> T divide(T a, T b, const OpSpec& spec) {
  if constexpr (std::is_integral_v<T>) {
    D5_CHECK_ARG(b != 0, "{}: integer division by zero ({} / 0)", spec.label(), static_cast<int64_t>(a));
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return wrap_sub(T{0}, a);  // the one quotient that overflows: INT_MIN / -1
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

template <typename T> T integer_pow(T base, int64_t e, const OpSpec& spec) {
  if (e < 0) {
    D5_CHECK_ARG(base != 0, "{}: 0 raised to the negative power {} in integer arithmetic", spec.label(), e);
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>)
      if (base == -1) return e % 2 == 0 ? T{1} : T{-1};
    return 0;  // |base| >= 2: the real result lies strictly between -1 and 1
  }
  using U = WrapUnsigned<T>;
  U r = 1, b = static_cast<U>(base);
  for (auto n = static_cast<uint64_t>(e); n != 0; n >>= 1) {
    if (n & 1) r = static_cast<U>(r * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(r);
}

template <typename T, typename E> T power(T x, E e, const OpSpec& spec) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(e)));
  else if constexpr (std::is_integral_v<E>)
    return integer_pow<T>(x, static_cast<int64_t>(e), spec);
  else
    return checked_integer<T>(std::pow(static_cast<double>(x), static_cast<double>(e)), spec);
}

// d(out)/d(input `k`) at one element, in double.
double partial(Arith kind, size_t k, double a, double b) {
  switch (kind) {
    case Arith::add: return 1;
    case Arith::sub: return k == 0 ? 1 : -1;
    case Arith::mul: return k == 0 ? b : a;
    case Arith::div: return k == 0 ? 1 / b : -a / (b * b);
    case Arith::pow:
      if (k == 0) return b == 0 ? 0.0 : b * std::pow(a, b - 1);
      return a > 0 ? std::pow(a, b) * std::log(a) : 0.0;
  }
  return 0;
}

class ArithOp : public ReferenceOp {
 public:
  ArithOp(const OpSpec& spec, Arith kind) : ArithOp(spec, kind, binary_shapes(spec, kind != Arith::pow)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (kind_ == Arith::pow) {
      dispatch<float, double, int32_t, int64_t>(in[0].dtype(), spec_, [&]<typename T>() {
        dispatch_numeric(in[1].dtype(), spec_, [&]<typename E>() {
          map<T, E>(in[0], in[1], out[0], [&](T x, E e) { return power<T, E>(x, e, spec_); });
        });
      });
      return;
    }
    dispatch_numeric(in[0].dtype(), spec_, [&]<typename T>() {
      switch (kind_) {
        case Arith::add: map<T, T>(in[0], in[1], out[0], wrap_add<T>); break;
        case Arith::sub: map<T, T>(in[0], in[1], out[0], wrap_sub<T>); break;
        case Arith::mul: map<T, T>(in[0], in[1], out[0], wrap_mul<T>); break;
        default: map<T, T>(in[0], in[1], out[0], [&](T a, T b) { return divide(a, b, spec_); }); break;
      }
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    return {true, is_floating(spec_.inputs[1].dtype)};
  }
  std::string no_gradient_reason() const override {
    return fmt::format("{}: integer arithmetic ({}) is not differentiable", spec_.label(),
                       to_string(spec_.inputs[0].dtype));
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    // Pow may pair a base and an exponent of different floating dtypes: compute in the base's.
    const DType t = in[0].dtype();
    const Tensor b = in[1].dtype() == t ? in[1] : in[1].cast(t);
    for (size_t k = 0; k < 2; ++k) {
      if (k >= gx.size() || !gx[k].defined()) continue;
      if (!gy[0].defined()) {
        gx[k].fill(0);
        continue;
      }
      Tensor full = Tensor::uninitialized(output_descs()[0]);
      dispatch_float(t, spec_, [&]<typename T>() {
        const T *pa = in[0].data_as<T>(), *pb = b.data_as<T>(), *g = gy[0].data_as<T>();
        T* f = full.data_as<T>();
        bc_.for_each([&](int64_t o, const std::array<int64_t, 2>& i) {
          f[o] = static_cast<T>(static_cast<double>(g[o]) * partial(kind_, k, static_cast<double>(pa[i[0]]),
                                                                    static_cast<double>(pb[i[1]])));
        });
      });
      if (gx[k].dtype() == t) {
        reduce_grad(full, gx[k], shapes_.in[k]);
      } else {
        Tensor r(TensorDesc{t, gx[k].shape()});
        reduce_grad(full, r, shapes_.in[k]);
        gx[k].copy_from(r.cast(gx[k].dtype()));
      }
    }
  }

  double flops() const override { return static_cast<double>(output_descs()[0].numel()); }

 private:
  ArithOp(const OpSpec& spec, Arith kind, BinaryShapes shapes)
      : ReferenceOp(spec, {TensorDesc{spec.inputs[0].dtype, shapes.out, Layout::any}}),
        kind_(kind),
        shapes_(std::move(shapes)),
        bc_(shapes_.out, shapes_.in) {
    // Refuse unsupported dtypes now rather than at the first forward.
    if (kind == Arith::pow) {
      dispatch<float, double, int32_t, int64_t>(spec.inputs[0].dtype, spec, []<typename>() {});
      dispatch_numeric(spec.inputs[1].dtype, spec, []<typename>() {});
    } else {
      dispatch_numeric(spec.inputs[0].dtype, spec, []<typename>() {});
    }
  }

  template <typename A, typename B, typename F>
  void map(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
    const A* pa = a.data_as<A>();
    const B* pb = b.data_as<B>();
    A* po = out.data_as<A>();
    bc_.for_each([&](int64_t o, const std::array<int64_t, 2>& i) { po[o] = f(pa[i[0]], pb[i[1]]); });
  }

  Arith kind_;
  BinaryShapes shapes_;
  BroadcastN<2> bc_;
};

}  // namespace

void register_binary_ops(OpRegistry& r) {
  static constexpr std::pair<const char*, Arith> kOps[] = {{"Add", Arith::add},
                                                           {"Sub", Arith::sub},
                                                           {"Mul", Arith::mul},
                                                           {"Div", Arith::div},
                                                           {"Pow", Arith::pow}};
  for (const auto& [type, kind] : kOps)
    add_op(r, type, true,
           [kind = kind](const OpSpec& s) -> OpCreateResult { return std::make_unique<ArithOp>(s, kind); });
}

}  // namespace d5::reference
