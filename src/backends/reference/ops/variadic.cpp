// Variadic element-wise operators with multidirectional broadcasting: Sum, Mean, Max, Min.
//
// Sum and Mean (floating point, as in ONNX) accumulate in double. Max and Min take every numeric
// dtype and propagate NaN like numpy.maximum/minimum (the ONNX reference implementation).
// Gradients: Sum passes g to every input and Mean g / n, each summed back over broadcast axes.
// Max and Min route g of each output element to exactly one input: the first (lowest-numbered)
// input attaining the extreme, so ties are deterministic and gradients are never split (PyTorch
// splits ties of a binary maximum evenly; a tie is a kink where either choice is a subgradient).
#include "elementwise.h"

namespace d5::reference {

namespace {

enum class Variadic { sum, mean, max, min };

class VariadicOp : public ReferenceOp {
 public:
  VariadicOp(const OpSpec& spec, Variadic kind) : ReferenceOp(spec, {output_desc(spec)}), kind_(kind) {
    if (kind == Variadic::sum || kind == Variadic::mean)
      dispatch_float(spec.inputs[0].dtype, spec, []<typename>() {});
    else
      dispatch_numeric(spec.inputs[0].dtype, spec, []<typename>() {});
    for (const auto& d : spec.inputs) maps_.emplace_back(d.shape, outputs_[0].shape);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_numeric(in[0].dtype(), spec_, [&]<typename T>() {
      if (kind_ == Variadic::max || kind_ == Variadic::min) {
        select<T>(in, out[0].data_as<T>(), nullptr);
        return;
      }
      std::vector<double> acc(static_cast<size_t>(out[0].numel()), 0.0);
      for (size_t k = 0; k < in.size(); ++k) {
        const T* x = in[k].data_as<T>();
        maps_[k].for_each(
            [&](int64_t o, int64_t i) { acc[static_cast<size_t>(o)] += static_cast<double>(x[i]); });
      }
      const double n = kind_ == Variadic::mean ? static_cast<double>(in.size()) : 1.0;
      T* y = out[0].data_as<T>();
      for (size_t o = 0; o < acc.size(); ++o) y[o] = static_cast<T>(acc[o] / n);
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    return std::vector<bool>(spec_.inputs.size(), true);
  }
  std::string no_gradient_reason() const override {
    return fmt::format("{}: integer inputs ({}) are not differentiable", spec_.label(),
                       to_string(spec_.inputs[0].dtype));
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) {
      for (auto& g : gx)
        if (g.defined()) g.fill(0);
      return;
    }
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* g = gy[0].data_as<T>();
      const int64_t n = gy[0].numel();
      Tensor full = Tensor::uninitialized(outputs_[0]);
      T* f = full.data_as<T>();
      if (kind_ == Variadic::sum || kind_ == Variadic::mean) {
        const double scale = kind_ == Variadic::mean ? 1.0 / static_cast<double>(in.size()) : 1.0;
        for (int64_t o = 0; o < n; ++o) f[o] = static_cast<T>(static_cast<double>(g[o]) * scale);
        for (size_t k = 0; k < gx.size(); ++k)
          if (gx[k].defined()) reduce_to_shape(full, gx[k]);
        return;
      }
      std::vector<uint32_t> winner(static_cast<size_t>(n));
      Tensor best = Tensor::uninitialized(outputs_[0]);
      select<T>(in, best.data_as<T>(), winner.data());
      for (size_t k = 0; k < gx.size(); ++k) {
        if (!gx[k].defined()) continue;
        for (int64_t o = 0; o < n; ++o) f[o] = winner[static_cast<size_t>(o)] == k ? g[o] : T{0};
        reduce_to_shape(full, gx[k]);
      }
    });
  }

  double flops() const override {
    const double n = static_cast<double>(outputs_[0].numel());
    const double k = static_cast<double>(spec_.inputs.size());
    return (kind_ == Variadic::mean ? k : k - 1) * n;
  }

 private:
  static TensorDesc output_desc(const OpSpec& spec) {
    D5_CHECK_ARG(!spec.inputs.empty(), "{}: needs at least one input", spec.label());
    std::vector<Shape> shapes;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      D5_CHECK_ARG(spec.has_input(i), "{}: input {} is missing (inputs of a variadic op are not optional)",
                   spec.label(), i);
      D5_CHECK_ARG(spec.inputs[i].dtype == spec.inputs[0].dtype, "{}: input {} is {} but input 0 is {}",
                   spec.label(), i, to_string(spec.inputs[i].dtype), to_string(spec.inputs[0].dtype));
      shapes.push_back(spec.inputs[i].shape);
    }
    return {spec.inputs[0].dtype, broadcast_shapes(shapes, spec), Layout::any};
  }

  // Max/Min of the broadcast inputs into `best`; `winner` (optional) gets the input that won.
  template <typename T> void select(std::span<const Tensor> in, T* best, uint32_t* winner) const {
    const bool max = kind_ == Variadic::max;
    for (size_t k = 0; k < in.size(); ++k) {
      const T* x = in[k].data_as<T>();
      maps_[k].for_each([&](int64_t o, int64_t i) {
        const T v = x[i];
        bool take = k == 0 || (max ? v > best[o] : v < best[o]);  // strict: the first of equals stays
        if constexpr (std::is_floating_point_v<T>) take = take || (std::isnan(v) && !std::isnan(best[o]));
        if (!take) return;
        best[o] = v;
        if (winner) winner[o] = static_cast<uint32_t>(k);
      });
    }
  }

  Variadic kind_;
  std::vector<BroadcastMap> maps_;
};

}  // namespace

void register_variadic_ops(OpRegistry& r) {
  static constexpr std::pair<const char*, Variadic> kOps[] = {
      {"Sum", Variadic::sum}, {"Mean", Variadic::mean}, {"Max", Variadic::max}, {"Min", Variadic::min}};
  for (const auto& [type, kind] : kOps)
    add_op(r, type, true,
           [kind = kind](const OpSpec& s) -> OpCreateResult { return std::make_unique<VariadicOp>(s, kind); });
}

}  // namespace d5::reference
