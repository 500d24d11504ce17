// GatherElements and ScatterElements: indexing one element at a time along `axis`, ONNX's form.
// `indices` has the rank of `data`; position p = (p_0, ..., p_{r-1}) of indices names the data
// element q with q_axis = indices[p] (negatives count back from the end) and q_d = p_d elsewhere:
//   GatherElements:  y[p] = data[q]                               (y has the shape of indices)
//   ScatterElements: y = data; then, in the order of p, y[q] = updates[p]   (reduction none)
//                                                       y[q] += updates[p]  (add)
//                                                       y[q] *= updates[p]  (mul)
//                                                y[q] = max(y[q], updates[p])  (max, opset 18)
//                                                y[q] = min(y[q], updates[p])  (min, opset 18)
// Gradients:
//   GatherElements:  d data[q] = sum of g[p] over the p that name q (repeats add up)
//   ScatterElements, none: d data = g with every written q zeroed; d updates[p] = g[q] when p was
//                    the last write to q (it alone reaches y), else 0
//                    add:  d data = g; d updates[p] = g[q]
//                    mul:  y[q] = data[q] * prod_k u_k over the k that name q, so
//                          d data[q] = g[q] * prod_k u_k, d u_k = g[q] * data[q] * prod_{j != k} u_j
//                    max, min: y[q] is one of data[q] and the u_k that name q; g[q] is split evenly
//                          among those equal to it (ties share, as torch's scatter_reduce amax/amin)
#include <cstring>
#include <map>

#include "movement_common.h"

namespace d5::reference {

namespace {

// Visits every position of `indices`: f(position p, data offset q). Checks that indices fit in
// data on every axis but `axis`, and every index value, before the first call.
class ElementIndexer {
 public:
  ElementIndexer(const OpSpec& spec, size_t axis) : spec_(spec), axis_(axis) {
    const auto& data = spec.inputs[0].shape.dims();
    const auto& idx = spec.inputs[1].shape.dims();
    D5_CHECK_ARG(idx.size() == data.size(), "{}: indices must have the rank of data ({}), got {}", spec.label(),
                 data.size(), spec.inputs[1].shape.to_string());
    for (size_t d = 0; d < data.size(); ++d)
      D5_CHECK_ARG(d == axis || idx[d] <= data[d],
                   "{}: indices {} do not fit in data {} on axis {} (indices may be smaller, never larger)",
                   spec.label(), spec.inputs[1].shape.to_string(), spec.inputs[0].shape.to_string(), d);
    strides_.assign(data.size(), 1);
    for (size_t d = data.size(); d-- > 1;) strides_[d - 1] = strides_[d] * data[d];
  }

  template <typename F>
  void for_each(const Tensor& indices, F&& f) const {
    const auto& data = spec_.inputs[0].shape.dims();
    const auto& dims = indices.shape().dims();
    const int64_t extent = data.empty() ? 1 : data[axis_];
    dispatch<int32_t, int64_t>(indices.dtype(), spec_, [&]<typename I>() {
      const I* ix = indices.data_as<I>();
      const int64_t n = indices.numel();
      for (int64_t p = 0; p < n; ++p) {
        const auto v = static_cast<int64_t>(ix[p]);
        D5_CHECK_ARG(v >= -extent && v < extent,
                     "{}: index {} (position {}) is out of range for axis {} of extent {}", spec_.label(), v, p,
                     axis_, extent);
      }
      if (n == 0) return;
      // The data offset of position p without its axis term, kept up to date as p advances.
      std::vector<int64_t> coord(dims.size(), 0);
      int64_t base = 0;
      for (int64_t p = 0; p < n; ++p) {
        const auto v = static_cast<int64_t>(ix[p]);
        f(p, base + (v < 0 ? v + extent : v) * strides_[axis_]);
        for (size_t d = dims.size(); d-- > 0;) {
          if (d != axis_) base += strides_[d];
          if (++coord[d] < dims[d]) break;
          if (d != axis_) base -= strides_[d] * dims[d];
          coord[d] = 0;
        }
      }
    });
  }

 private:
  const OpSpec& spec_;
  size_t axis_;
  std::vector<int64_t> strides_;
};

size_t axis_of(const OpSpec& spec) {
  const size_t rank = spec.inputs[0].shape.rank();
  D5_CHECK_ARG(rank >= 1, "{}: data must have rank >= 1, got a scalar", spec.label());
  const auto& idx = spec.inputs[1];
  D5_CHECK_ARG(idx.dtype == DType::i32 || idx.dtype == DType::i64, "{}: indices must be int32 or int64, got {}",
               spec.label(), to_string(idx.dtype));
  return normalize_axis(spec.attrs.get_int("axis", 0), rank, spec, "axis");
}

class GatherElementsOp : public MovementOp {
 public:
  explicit GatherElementsOp(const OpSpec& spec)
      : MovementOp(spec, {TensorDesc{spec.inputs[0].dtype, spec.inputs[1].shape}}), index_(spec_, axis_of(spec_)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const size_t es = dtype_size(in[0].dtype());
    const auto* src = static_cast<const unsigned char*>(in[0].data());
    auto* dst = static_cast<unsigned char*>(out[0].data());
    index_.for_each(in[1], [&](int64_t p, int64_t q) {
      std::memcpy(dst + static_cast<size_t>(p) * es, src + static_cast<size_t>(q) * es, es);
    });
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    std::vector<double> acc(static_cast<size_t>(gx[0].numel()), 0.0);
    if (gy[0].defined()) {
      dispatch_all_floats(gy[0].dtype(), spec_, [&]<typename T>() {
        const T* g = gy[0].data_as<T>();
        index_.for_each(in[1], [&](int64_t p, int64_t q) { acc[static_cast<size_t>(q)] += to_double(g[p]); });
      });
    }
    store_doubles(acc, gx[0]);
  }

 private:
  ElementIndexer index_;
};

enum class Reduction { none, add, mul, max, min };

Reduction reduction_of(const OpSpec& spec) {
  const std::string r = spec.attrs.get_string("reduction", "none");
  if (r == "none") return Reduction::none;
  if (r == "add") return Reduction::add;
  if (r == "mul") return Reduction::mul;
  if (r == "max" || r == "min") {
    D5_CHECK_ARG(spec.opset >= 18, "{}: reduction '{}' came in opset 18; the network's opset is {}", spec.label(), r,
                 spec.opset);
    return r == "max" ? Reduction::max : Reduction::min;
  }
  D5_THROW(InvalidArgument, "{}: reduction '{}' is not one of none, add, mul, max, min", spec.label(), r);
}

template <typename T>
T reduce_one(Reduction r, T y, T u) {
  switch (r) {
    case Reduction::add: return static_cast<T>(y + u);
    case Reduction::mul: return static_cast<T>(y * u);
    case Reduction::max: return (u != u || y < u) ? u : y;  // NaN propagates, as np.maximum
    case Reduction::min: return (u != u || u < y) ? u : y;
    case Reduction::none: break;
  }
  return u;
}

class ScatterElementsOp : public MovementOp {
 public:
  explicit ScatterElementsOp(const OpSpec& spec)
      : MovementOp(spec, {spec.inputs[0]}, 3), index_(spec_, axis_of(spec_)), reduction_(reduction_of(spec)) {
    D5_CHECK_ARG(spec.inputs[2].shape == spec.inputs[1].shape && spec.inputs[2].dtype == spec.inputs[0].dtype,
                 "{}: updates must have the shape of indices ({}) and the dtype of data ({}), got {}", spec.label(),
                 spec.inputs[1].shape.to_string(), to_string(spec.inputs[0].dtype), spec.inputs[2].to_string());
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    return {true, false, true};
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    copy_bytes(in[0], out[0]);
    if (reduction_ == Reduction::none) {
      const size_t es = dtype_size(in[0].dtype());
      const auto* src = static_cast<const unsigned char*>(in[2].data());
      auto* dst = static_cast<unsigned char*>(out[0].data());
      index_.for_each(in[1], [&](int64_t p, int64_t q) {
        std::memcpy(dst + static_cast<size_t>(q) * es, src + static_cast<size_t>(p) * es, es);
      });
      return;
    }
    dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t>(in[0].dtype(), spec_, [&]<typename T>() {
      const T* u = in[2].data_as<T>();
      T* y = out[0].data_as<T>();
      index_.for_each(in[1], [&](int64_t p, int64_t q) { y[q] = reduce_one(reduction_, y[q], u[p]); });
    });
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    const size_t n_data = static_cast<size_t>(in[0].numel()), n_upd = static_cast<size_t>(in[2].numel());
    std::vector<double> g_data(n_data, 0.0), g_upd(n_upd, 0.0);
    if (gy[0].defined()) {
      dispatch_all_floats(gy[0].dtype(), spec_, [&]<typename T>() {
        const T* g = gy[0].data_as<T>();
        for (size_t q = 0; q < n_data; ++q) g_data[q] = to_double(g[q]);
        // The positions p that write each q, in order.
        std::map<int64_t, std::vector<int64_t>> writers;
        index_.for_each(in[1], [&](int64_t p, int64_t q) { writers[q].push_back(p); });
        const T* data = in[0].data_as<T>();
        const T* u = in[2].data_as<T>();
        for (const auto& [q, ps] : writers) {
          const double gq = to_double(g[q]);
          if (reduction_ == Reduction::none) {
            g_data[static_cast<size_t>(q)] = 0;
            g_upd[static_cast<size_t>(ps.back())] = gq;
          } else if (reduction_ == Reduction::add) {
            for (int64_t p : ps) g_upd[static_cast<size_t>(p)] = gq;
          } else if (reduction_ == Reduction::max || reduction_ == Reduction::min) {
            const double dq = to_double(data[q]);
            double best = dq;
            for (int64_t p : ps) best = reduce_one(reduction_, best, to_double(u[p]));
            size_t ties = dq == best ? 1 : 0;
            for (int64_t p : ps) ties += to_double(u[p]) == best ? 1 : 0;
            const double share = gq / static_cast<double>(ties);
            g_data[static_cast<size_t>(q)] = dq == best ? share : 0.0;
            for (int64_t p : ps) g_upd[static_cast<size_t>(p)] = to_double(u[p]) == best ? share : 0.0;
          } else {
            double all = 1;
            for (int64_t p : ps) all *= to_double(u[p]);
            g_data[static_cast<size_t>(q)] = gq * all;
            // Products of the others, without dividing (an update may be 0).
            for (size_t k = 0; k < ps.size(); ++k) {
              double others = to_double(data[q]);
              for (size_t j = 0; j < ps.size(); ++j)
                if (j != k) others *= to_double(u[ps[j]]);
              g_upd[static_cast<size_t>(ps[k])] = gq * others;
            }
          }
        }
      });
    }
    if (gx[0].defined()) store_doubles(g_data, gx[0]);
    if (gx.size() > 2 && gx[2].defined()) store_doubles(g_upd, gx[2]);
  }

  double flops() const override {
    return reduction_ == Reduction::none ? 0 : static_cast<double>(spec_.inputs[1].numel());
  }

 private:
  ElementIndexer index_;
  Reduction reduction_;
};

std::unique_ptr<Operator> make_gather_elements(const OpSpec& spec) {
  check_input_count(spec, 2, 2);
  return std::make_unique<GatherElementsOp>(spec);
}

std::unique_ptr<Operator> make_scatter_elements(const OpSpec& spec) {
  check_input_count(spec, 3, 3);
  return std::make_unique<ScatterElementsOp>(spec);
}

}  // namespace

void register_elements_indexing_ops(OpRegistry& r) {
  add_op(r, "GatherElements", true, [](const OpSpec& s) -> OpCreateResult { return make_gather_elements(s); });
  add_op(r, "ScatterElements", true, [](const OpSpec& s) -> OpCreateResult { return make_scatter_elements(s); });
}

}  // namespace d5::reference
