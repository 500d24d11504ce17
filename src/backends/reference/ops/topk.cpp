// TopK: the K largest (largest=1, the default) or smallest elements along `axis` (default -1),
// ONNX's form. Outputs Values (the elements, the input's dtype) and Indices (their positions along
// the axis, int64), both of the input's shape with the axis cut to K. Order: best first; equal
// values keep their positional order (the lower index first), as ONNX requires; NaN counts as
// larger than every number, so it comes first for largest and last for smallest (NumPy's sort
// order). `sorted`=0 lets an implementation return any order; this one sorts anyway.
// K is attribute `k` before opset 10 and input 1 (int64 [1]) since; it decides the output shape,
// so it must be known when the operator is created.
// Gradient: d x[i] = g[j] for the output j that holds x[i]; 0 for elements not selected.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "movement_common.h"

namespace d5::reference {

namespace {

int64_t k_of(const OpSpec& spec) {
  if (spec.opset < 10) {
    check_input_count(spec, 1, 1);
    return spec.attrs.get_int("k");
  }
  check_input_count(spec, 2, 2);
  const std::vector<int64_t> k = int_values(constant_input(spec, 1, "K"), spec, "K");
  D5_CHECK_ARG(k.size() == 1, "{}: K must hold one value, it holds {}", spec.label(), k.size());
  return k[0];
}

class TopKOp : public ReferenceOp {
 public:
  TopKOp(const OpSpec& spec, size_t axis, int64_t k) : ReferenceOp(spec, outputs_of(spec, axis, k)), k_(k) {
    const auto& dims = spec.inputs[0].shape.dims();
    outer_ = product(dims, 0, axis);
    extent_ = dims[axis];
    inner_ = product(dims, axis + 1, dims.size());
    largest_ = spec.attrs.get_int("largest", 1) != 0;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    int64_t* indices = out[1].data_as<int64_t>();
    dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t>(in[0].dtype(), spec_, [&]<typename T>() {
      const T* x = in[0].data_as<T>();
      T* values = out[0].data_as<T>();
      for_each_lane([&](int64_t in_base, int64_t out_base, std::vector<int64_t>& order) {
        const auto at = [&](int64_t j) { return x[in_base + j * inner_]; };
        // "a before b": the ordering above, a strict weak order even with NaN.
        const auto before = [&](int64_t a, int64_t b) {
          const T va = at(a), vb = at(b);
          if constexpr (std::is_floating_point_v<T>) {
            const bool na = std::isnan(va), nb = std::isnan(vb);
            if (na || nb) return largest_ ? na && !nb : nb && !na;
          }
          return largest_ ? va > vb : va < vb;
        };
        std::stable_sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < k_; ++j) {
          values[out_base + j * inner_] = at(order[static_cast<size_t>(j)]);
          indices[out_base + j * inner_] = order[static_cast<size_t>(j)];
        }
      });
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    std::vector<bool> m(spec_.inputs.size(), false);  // K (opset 10 on) has none
    m[0] = true;
    return m;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    std::vector<double> acc(static_cast<size_t>(gx[0].numel()), 0.0);
    if (gy[0].defined()) {
      const int64_t* indices = out[1].data_as<int64_t>();
      dispatch_float(gy[0].dtype(), spec_, [&]<typename T>() {
        const T* g = gy[0].data_as<T>();
        for (int64_t o = 0; o < outer_; ++o)
          for (int64_t i = 0; i < inner_; ++i)
            for (int64_t j = 0; j < k_; ++j) {
              const int64_t at = (o * k_ + j) * inner_ + i;
              acc[static_cast<size_t>((o * extent_ + indices[at]) * inner_ + i)] += static_cast<double>(g[at]);
            }
      });
    }
    store_doubles(acc, gx[0]);
  }

  double flops() const override {
    // Comparisons of a sort of each lane: n log2 n.
    const double n = static_cast<double>(extent_);
    return static_cast<double>(outer_ * inner_) * n * std::log2(std::max(2.0, n));
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& spec, size_t axis, int64_t k) {
    dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t>(spec.inputs[0].dtype, spec, []<typename T>() {});
    const int64_t extent = spec.inputs[0].shape[axis];
    D5_CHECK_ARG(k >= 0 && k <= extent, "{}: K={} is outside [0, {}], the extent of axis {} of {}", spec.label(), k,
                 extent, axis, spec.inputs[0].shape.to_string());
    std::vector<int64_t> dims = spec.inputs[0].shape.dims();
    dims[axis] = k;
    return {TensorDesc{spec.inputs[0].dtype, Shape(dims)}, TensorDesc{DType::i64, Shape(dims)}};
  }

  // f(input offset of a lane's first element, output offset of its first element, scratch order
  // holding 0..extent-1) for every lane along the axis.
  template <typename F>
  void for_each_lane(F&& f) const {
    std::vector<int64_t> order(static_cast<size_t>(extent_));
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < inner_; ++i) {
        std::iota(order.begin(), order.end(), int64_t{0});
        f(o * extent_ * inner_ + i, o * k_ * inner_ + i, order);
      }
  }

  int64_t k_ = 0, outer_ = 0, extent_ = 0, inner_ = 0;
  bool largest_ = true;
};

std::unique_ptr<Operator> make_topk(const OpSpec& spec) {
  const int64_t k = k_of(spec);
  const size_t rank = spec.inputs[0].shape.rank();
  D5_CHECK_ARG(rank >= 1, "{}: the input must have rank >= 1, got a scalar", spec.label());
  return std::make_unique<TopKOp>(spec, normalize_axis(spec.attrs.get_int("axis", -1), rank, spec, "axis"), k);
}

}  // namespace

void register_topk_ops(OpRegistry& r) {
  add_op(r, "TopK", true, [](const OpSpec& s) -> OpCreateResult { return make_topk(s); });
}

}  // namespace d5::reference
