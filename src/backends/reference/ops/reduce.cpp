// ReduceSum, ReduceMean, ReduceMax and ReduceL2. The axes come from the `axes` attribute (older
// opsets) or from input 1 (ReduceSum at opset 13+, every reduction at 18+), which must then be a
// constant. Empty axes reduce everything unless noop_with_empty_axes=1, which makes the op the
// identity. Sums accumulate in double; integer ReduceSum wraps around like integer addition.
// ReduceMax also takes bool (opset 20), where the maximum is the logical or.
#include <algorithm>

#include "norm_common.h"

namespace d5::reference {

namespace {

enum class Kind { Sum, Mean, Max, L2 };

struct Plan {
  bool noop = false;
  Shape kept;  // the input shape with the reduced axes set to 1
  Shape out;   // kept, or without the reduced axes when keepdims=0
};

std::vector<int64_t> axes_of(const OpSpec& s) {
  if (!s.has_input(1)) return s.attrs.get_ints("axes", {});
  D5_CHECK_ARG(!s.attrs.has("axes"), "{}: axes are given both as an attribute and as input 1", s.label());
  const Tensor* v = s.value(1);
  D5_CHECK_ARG(v != nullptr, "{}: input 1 (axes) must be a constant known when the operator is created",
               s.label());
  D5_CHECK_ARG(is_integral(v->dtype()) && v->shape().rank() <= 1,
               "{}: input 1 (axes) must be a 1-D integer tensor, got {}", s.label(), v->desc().to_string());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < v->numel(); ++i)
    axes.push_back(to_elem<int64_t>(v->get(i)));  // saturates: never UB
  return axes;
}

Plan plan_of(const OpSpec& s) {
  D5_CHECK_ARG(s.inputs.size() == 1 || s.inputs.size() == 2,
               "{}: needs inputs data and optionally axes, got {}", s.label(), s.inputs.size());
  D5_CHECK_ARG(s.has_input(0), "{}: input 0 (data) is required", s.label());
  const Shape& x = s.inputs[0].shape;
  const auto axes = axes_of(s);
  Plan p;
  std::vector<bool> reduced(x.rank(), axes.empty());
  if (axes.empty() && s.attrs.get_int("noop_with_empty_axes", 0) != 0) {
    p.noop = true;
    reduced.assign(x.rank(), false);
  }
  for (int64_t a : axes) {
    const size_t i = checked_axis(s, a, x.rank(), "axes");
    D5_CHECK_ARG(!reduced[i], "{}: axis {} appears more than once in axes", s.label(), a);
    reduced[i] = true;
  }
  const bool keepdims = s.attrs.get_int("keepdims", 1) != 0;
  std::vector<int64_t> kept, out;
  for (size_t i = 0; i < x.rank(); ++i) {
    kept.push_back(reduced[i] ? 1 : x[i]);
    if (!reduced[i] || keepdims) out.push_back(reduced[i] ? 1 : x[i]);
  }
  p.kept = Shape(kept);
  p.out = Shape(out);
  return p;
}

class ReduceOp : public ReferenceOp {
 public:
  ReduceOp(const OpSpec& s, Kind kind) : ReduceOp(s, kind, plan_of(s)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const Tensor& x = in[0];
    if (plan_.noop) {
      out[0].copy_from(x.reshape(out[0].shape()));
      return;
    }
    const auto m = static_cast<size_t>(plan_.kept.numel());
    const BroadcastMap map(plan_.kept, x.shape());
    if (kind_ == Kind::Max) {
      dispatch_max(x.dtype(), spec_, [&]<typename T>() {
        const T* xs = x.data_as<T>();
        T* y = out[0].data_as<T>();
        // The first maximum wins (backward routes the gradient there); NaN propagates.
        argmax_.assign(m, -1);
        map.for_each([&](int64_t i, int64_t o) {
          int64_t& a = argmax_[static_cast<size_t>(o)];
          if (a < 0 || xs[i] > xs[a] || (xs[i] != xs[i] && xs[a] == xs[a])) a = i;
        });
        for (size_t o = 0; o < m; ++o) y[o] = argmax_[o] < 0 ? lowest<T>() : xs[argmax_[o]];
      });
      return;
    }
    dispatch_numeric(x.dtype(), spec_, [&]<typename T>() {
      const T* xs = x.data_as<T>();
      T* y = out[0].data_as<T>();
      if constexpr (!std::is_floating_point_v<T>) {
        if (kind_ == Kind::Sum) {
          std::vector<uint64_t> acc(m, 0);  // unsigned: wraps like the integer type, no overflow UB
          map.for_each(
              [&](int64_t i, int64_t o) { acc[static_cast<size_t>(o)] += static_cast<uint64_t>(xs[i]); });
          for (size_t o = 0; o < m; ++o) y[o] = static_cast<T>(acc[o]);
          return;
        }
      }
      std::vector<double> acc(m, 0.0);
      map.for_each([&](int64_t i, int64_t o) {
        const auto v = static_cast<double>(xs[i]);
        acc[static_cast<size_t>(o)] += kind_ == Kind::L2 ? v * v : v;
      });
      const auto count = static_cast<double>(group_size());
      for (size_t o = 0; o < m; ++o)
        y[o] = to_elem<T>(kind_ == Kind::L2     ? std::sqrt(acc[o])
                          : kind_ == Kind::Mean ? acc[o] / count
                                                : acc[o]);
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    std::vector<bool> m(spec_.inputs.size(), false);
    m[0] = true;
    return m;
  }
  std::string no_gradient_reason() const override {
    return "reductions of integer tensors have no gradient (the input is not floating point)";
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) {
      gx[0].fill(0);
      return;
    }
    if (plan_.noop) {
      gx[0].copy_from(gy[0].reshape(gx[0].shape()));
      return;
    }
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* xs = in[0].data_as<T>();
      const T* y = out[0].data_as<T>();
      const T* g = gy[0].data_as<T>();
      T* d = gx[0].data_as<T>();
      if (kind_ == Kind::Max) {
        D5_CHECK(argmax_.size() == static_cast<size_t>(plan_.kept.numel()), InvalidArgument,
                 "{}: backward called before forward", spec_.label());
        std::fill(d, d + in[0].numel(), T{0});
        for (size_t o = 0; o < argmax_.size(); ++o)
          if (argmax_[o] >= 0) d[argmax_[o]] = g[o];
        return;
      }
      const auto count = static_cast<double>(group_size());
      BroadcastMap(plan_.kept, in[0].shape()).for_each([&](int64_t i, int64_t o) {
        const auto go = static_cast<double>(g[o]);
        double v = go;
        if (kind_ == Kind::Mean) v = go / count;
        // d sqrt(sum x^2) / dx = x / y; at y = 0 every x is 0 and the subgradient 0 is used.
        if (kind_ == Kind::L2)
          v = y[o] == T{0} ? 0.0 : go * static_cast<double>(xs[i]) / static_cast<double>(y[o]);
        d[i] = static_cast<T>(v);
      });
    });
  }

  double flops() const override {
    return (kind_ == Kind::L2 ? 2 : 1) * static_cast<double>(spec_.inputs[0].numel());
  }

 private:
  ReduceOp(const OpSpec& s, Kind kind, Plan plan)
      : ReferenceOp(s, {TensorDesc{s.inputs[0].dtype, plan.out, Layout::any}}),
        kind_(kind),
        plan_(std::move(plan)) {
    if (kind == Kind::Max)
      dispatch_max(s.inputs[0].dtype, s, []<typename T>() {});
    else
      dispatch_numeric(s.inputs[0].dtype, s, []<typename T>() {});
  }

  // ReduceMax also takes bool (opset 20; the maximum is the logical or, false over nothing).
  template <typename F>
  static void dispatch_max(DType t, const OpSpec& s, F&& f) {
    dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t, bool>(t, s, std::forward<F>(f));
  }

  int64_t group_size() const {
    const int64_t kept = plan_.kept.numel();
    return kept == 0 ? 0 : spec_.inputs[0].numel() / kept;
  }

  // ONNX (opset 18+) defines the maximum of nothing as the lowest value of the type.
  template <typename T>
  static T lowest() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }

  Kind kind_;
  Plan plan_;
  std::vector<int64_t> argmax_;  // flat input index of each output's maximum, from the last forward
};

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  const std::pair<const char*, Kind> kinds[] = {
      {"ReduceSum", Kind::Sum}, {"ReduceMean", Kind::Mean}, {"ReduceMax", Kind::Max}, {"ReduceL2", Kind::L2}};
  for (const auto& [name, kind] : kinds)
    add_op(r, name, true,
           [kind = kind](const OpSpec& s) -> OpCreateResult { return std::make_unique<ReduceOp>(s, kind); });
}

}  // namespace d5::reference
