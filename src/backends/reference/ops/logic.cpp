// Comparisons and logical operators with multidirectional broadcasting and bool outputs:
// Equal (numeric and bool), Less, Greater, LessOrEqual, GreaterOrEqual (numeric), And, Or, Xor
// and Not (bool). Comparisons run in the inputs' own type, so int64 values beyond 2^53 compare
// exactly; floating comparisons follow IEEE (NaN is unequal to everything, itself included).
#include "elementwise.h"

namespace d5::reference {

namespace {

enum class Logic { eq, lt, gt, le, ge, and_, or_, xor_ };

bool is_logical(Logic k) { return k == Logic::and_ || k == Logic::or_ || k == Logic::xor_; }

constexpr const char* kNoGradient =
    "its output is boolean and piecewise constant in the inputs, so it has no gradient";

// Equal's dtypes (the ordering comparisons refuse bool when the op is created).
template <typename F> void dispatch_numeric_or_bool(DType t, const OpSpec& spec, F&& f) {
  dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t, bool>(t, spec, std::forward<F>(f));
}

template <typename T> auto comparator(Logic k) {
  return [k](T a, T b) {
    switch (k) {
      case Logic::eq: return a == b;
      case Logic::lt: return a < b;
      case Logic::gt: return a > b;
      case Logic::le: return a <= b;
      case Logic::ge: return a >= b;
      default: break;
    }
    return false;
  };
}

class LogicOp : public ReferenceOp {
 public:
  LogicOp(const OpSpec& spec, Logic kind) : LogicOp(spec, kind, binary_shapes(spec, true)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bool* y = out[0].data_as<bool>();
    if (is_logical(kind_)) {
      const bool *a = in[0].data_as<bool>(), *b = in[1].data_as<bool>();
      const Logic k = kind_;
      bc_.for_each([&](int64_t o, const std::array<int64_t, 2>& i) {
        const bool p = a[i[0]], q = b[i[1]];
        y[o] = k == Logic::and_ ? (p && q) : k == Logic::or_ ? (p || q) : p != q;
      });
      return;
    }
    dispatch_numeric_or_bool(in[0].dtype(), spec_, [&]<typename T>() {
      const T *a = in[0].data_as<T>(), *b = in[1].data_as<T>();
      const auto cmp = comparator<T>(kind_);
      bc_.for_each([&](int64_t o, const std::array<int64_t, 2>& i) { y[o] = cmp(a[i[0]], b[i[1]]); });
    });
  }

  std::string no_gradient_reason() const override {
    return fmt::format("{}: {}", spec_.label(), kNoGradient);
  }
  double flops() const override { return static_cast<double>(outputs_[0].numel()); }

 private:
  LogicOp(const OpSpec& spec, Logic kind, BinaryShapes shapes)
      : ReferenceOp(spec, {TensorDesc{DType::boolean, shapes.out, Layout::any}}),
        kind_(kind),
        bc_(shapes.out, shapes.in) {
    const DType t = spec.inputs[0].dtype;
    if (is_logical(kind))
      dispatch<bool>(t, spec, []<typename>() {});
    else if (kind == Logic::eq)
      dispatch_numeric_or_bool(t, spec, []<typename>() {});
    else
      dispatch_numeric(t, spec, []<typename>() {});
  }

  Logic kind_;
  BroadcastN<2> bc_;
};

class NotOp : public ReferenceOp {
 public:
  explicit NotOp(const OpSpec& spec) : ReferenceOp(spec, {checked_input(spec)}) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const bool* x = in[0].data_as<bool>();
    bool* y = out[0].data_as<bool>();
    for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = !x[i];
  }

  std::string no_gradient_reason() const override {
    return fmt::format("{}: {}", spec_.label(), kNoGradient);
  }
  double flops() const override { return static_cast<double>(outputs_[0].numel()); }

 private:
  static TensorDesc checked_input(const OpSpec& spec) {
    D5_CHECK_ARG(spec.inputs.size() == 1 && spec.has_input(0), "{}: needs one input, got {}", spec.label(),
                 spec.inputs.size());
    dispatch<bool>(spec.inputs[0].dtype, spec, []<typename>() {});
    return {DType::boolean, spec.inputs[0].shape, Layout::any};
  }
};

}  // namespace

void register_logic_ops(OpRegistry& r) {
  static constexpr std::pair<const char*, Logic> kOps[] = {
      {"Equal", Logic::eq},          {"Less", Logic::lt},  {"Greater", Logic::gt}, {"LessOrEqual", Logic::le},
      {"GreaterOrEqual", Logic::ge}, {"And", Logic::and_}, {"Or", Logic::or_},     {"Xor", Logic::xor_}};
  for (const auto& [type, kind] : kOps)
    add_op(r, type, false,
           [kind = kind](const OpSpec& s) -> OpCreateResult { return std::make_unique<LogicOp>(s, kind); });
  add_op(r, "Not", false, make<NotOp>);
}

}  // namespace d5::reference
