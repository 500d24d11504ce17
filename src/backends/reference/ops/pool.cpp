// MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool. The window geometry is the same for
// every (image, channel) plane, so it is resolved once, at creation, into a table: for each output
// position the in-image offsets of its taps (in kernel order) and its averaging divisor. The
// global pools are the same code with one window covering the whole image.
#include <cmath>
#include <type_traits>

#include "nn_common.h"

namespace d5::reference {

namespace {

enum class PoolKind { Max, Average };

struct PoolTable {
  std::vector<int64_t> begin;    // taps of position p: offsets[begin[p] .. begin[p + 1])
  std::vector<int64_t> offsets;  // row-major offsets within one plane
  std::vector<double> divisor;   // AveragePool: how many taps the mean divides by
};

// Builds the tap table; every window must see at least one image element.
PoolTable build_table(const OpSpec& spec, const Window& w, bool count_include_pad) {
  const size_t r = w.rank();
  const int64_t positions = w.position_count(), taps = w.kernel_size();
  std::vector<int64_t> stride(r, 1);
  for (size_t d = r; d-- > 1;) stride[d - 1] = stride[d] * w.image[d];
  PoolTable t;
  t.begin.reserve(static_cast<size_t>(positions + 1));
  t.begin.push_back(0);
  std::vector<int64_t> pos(r, 0), tap(r, 0);
  for (int64_t p = 0; p < positions; ++p) {
    int64_t padded = 0;  // taps inside the image or its padding (count_include_pad's divisor)
    std::fill(tap.begin(), tap.end(), 0);
    for (int64_t k = 0; k < taps; ++k) {
      int64_t offset = 0;
      bool inside = true, in_padded = true;
      for (size_t d = 0; d < r; ++d) {
        const int64_t x = w.coord(d, pos[d], tap[d]);
        inside = inside && x >= 0 && x < w.image[d];
        in_padded = in_padded && x >= -w.pads_begin[d] && x < w.image[d] + w.pads_end[d];
        offset += x * stride[d];
      }
      if (inside) t.offsets.push_back(offset);
      padded += in_padded;
      for (size_t d = r; d-- > 0;) {
        if (++tap[d] < w.kernel[d]) break;
        tap[d] = 0;
      }
    }
    const int64_t valid = static_cast<int64_t>(t.offsets.size()) - t.begin.back();
    D5_CHECK_ARG(valid > 0,
                 "{}: output position {} of the window lies entirely in the padding (pads {} / {})",
                 spec.label(), p, w.pads_begin, w.pads_end);
    t.begin.push_back(static_cast<int64_t>(t.offsets.size()));
    t.divisor.push_back(static_cast<double>(count_include_pad ? padded : valid));
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < w.positions[d]) break;
      pos[d] = 0;
    }
  }
  return t;
}

class PoolOp : public ReferenceOp {
 public:
  PoolOp(const OpSpec& spec, std::vector<TensorDesc> outs, PoolKind kind, Window w, bool count_include_pad,
         bool column_major_indices)
      : ReferenceOp(spec, std::move(outs)),
        kind_(kind),
        w_(std::move(w)),
        table_(build_table(spec, w_, count_include_pad)),
        column_major_(column_major_indices) {
    planes_ = spec.inputs[0].shape[0] * spec.inputs[0].shape[1];
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (kind_ == PoolKind::Average) {
      dispatch_float(in[0].dtype(), spec_, [&]<typename T>() { average<T>(in[0], out[0]); });
      return;
    }
    dispatch<float, double, int8_t, uint8_t>(in[0].dtype(), spec_,
                                             [&]<typename T>() { find_max<T>(in[0], &out[0]); });
    if (out.size() > 1 && out[1].defined()) write_indices(out[1]);
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    return {true};
  }
  std::string no_gradient_reason() const override { return "integer max pooling has no gradient"; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (!gx[0].defined() || zero_gradients_if_undefined(gy[0], gx)) return;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* dy = gy[0].data_as<T>();
      T* dx = gx[0].data_as<T>();
      std::fill(dx, dx + gx[0].numel(), T(0));
      const int64_t image = w_.image_size(), positions = w_.position_count();
      // The gradient of max goes to the element forward chose (the first of tied maxima). Planes
      // are disjoint in dx, so they run in parallel.
      if (kind_ == PoolKind::Max && argmax_.empty()) find_max<T>(in[0], nullptr);
#pragma omp parallel for if (worth_parallel(flops()))
      for (int64_t c = 0; c < planes_; ++c)
        for (int64_t p = 0; p < positions; ++p) {
          const int64_t i = c * positions + p;
          if (kind_ == PoolKind::Max) {
            dx[argmax_[static_cast<size_t>(i)]] += dy[i];
            continue;
          }
          const T g = static_cast<T>(static_cast<double>(dy[i]) / table_.divisor[p]);
          for (int64_t k = table_.begin[p]; k < table_.begin[p + 1]; ++k)
            dx[c * image + table_.offsets[k]] += g;
        }
    });
  }

  double flops() const override {
    return static_cast<double>(planes_) * static_cast<double>(table_.offsets.size());
  }

 private:
  template <typename T> void average(const Tensor& x, Tensor& y) {
    const T* xs = x.data_as<T>();
    T* ys = y.data_as<T>();
    const int64_t image = w_.image_size(), positions = w_.position_count();
#pragma omp parallel for if (worth_parallel(flops()))
    for (int64_t c = 0; c < planes_; ++c)
      for (int64_t p = 0; p < positions; ++p) {
        double acc = 0;
        for (int64_t k = table_.begin[p]; k < table_.begin[p + 1]; ++k)
          acc += xs[c * image + table_.offsets[k]];
        ys[c * positions + p] = static_cast<T>(acc / table_.divisor[p]);
      }
  }

  // Records in argmax_ the flat input index each output takes (NaN wins, as in PyTorch; ties go
  // to the first tap) and writes the maxima to y when given.
  template <typename T> void find_max(const Tensor& x, Tensor* y) {
    const T* xs = x.data_as<T>();
    T* ys = y ? y->data_as<T>() : nullptr;
    const int64_t image = w_.image_size(), positions = w_.position_count();
    argmax_.resize(static_cast<size_t>(planes_ * positions));
#pragma omp parallel for if (worth_parallel(flops()))
    for (int64_t c = 0; c < planes_; ++c) {
      const T* plane = xs + c * image;
      for (int64_t p = 0; p < positions; ++p) {
        int64_t best = table_.offsets[table_.begin[p]];
        for (int64_t k = table_.begin[p] + 1; k < table_.begin[p + 1]; ++k) {
          if (better(plane[table_.offsets[k]], plane[best])) best = table_.offsets[k];
        }
        argmax_[c * positions + p] = c * image + best;
        if (ys) ys[c * positions + p] = plane[best];
      }
    }
  }
  template <typename T> static bool better(T v, T best) {
    if constexpr (std::is_floating_point_v<T>)
      return v > best || (std::isnan(v) && !std::isnan(best));
    else
      return v > best;
  }

  // ONNX Indices: flat indices into X, the spatial part row-major or (storage_order 1) column-major.
  void write_indices(Tensor& out) const {
    int64_t* idx = out.data_as<int64_t>();
    const int64_t image = w_.image_size();
    const size_t r = w_.rank();
    std::vector<int64_t> coord(r);
    for (size_t i = 0; i < argmax_.size(); ++i) {
      const int64_t flat = argmax_[i];
      if (!column_major_) {
        idx[i] = flat;
        continue;
      }
      int64_t rest = flat % image, col = 0;
      for (size_t d = r; d-- > 0;) {
        coord[d] = rest % w_.image[d];
        rest /= w_.image[d];
      }
      for (size_t d = r; d-- > 0;) col = col * w_.image[d] + coord[d];
      idx[i] = flat - flat % image + col;
    }
  }

  PoolKind kind_;
  Window w_;
  PoolTable table_;
  bool column_major_;
  int64_t planes_ = 0;           // N * C
  std::vector<int64_t> argmax_;  // per output: flat index into X, from the last forward
};

void check_pool_input(const OpSpec& spec, size_t min_rank, PoolKind kind) {
  D5_CHECK_ARG(spec.inputs.size() == 1 && spec.has_input(0), "{}: needs exactly one input X, got {}",
               spec.label(), spec.inputs.size());
  const Shape& x = spec.inputs[0].shape;
  D5_CHECK_ARG(x.rank() >= min_rank, "{}: X {} needs N, C and {} spatial axes", spec.label(), x.to_string(),
               min_rank > 2 ? "one or more" : "any number of");
  const DType t = spec.inputs[0].dtype;
  const bool max = kind == PoolKind::Max;
  D5_CHECK_ARG(t == DType::f32 || t == DType::f64 || (max && (t == DType::i8 || t == DType::u8)),
               "{}: dtype {} is not supported ({})", spec.label(), to_string(t),
               max ? "f32, f64, i8, u8" : "f32, f64");
}

std::vector<TensorDesc> pool_outputs(const OpSpec& spec, const Window& w, bool with_indices) {
  const Shape y = nc_shape(spec.inputs[0].shape[0], spec.inputs[0].shape[1], w.positions);
  std::vector<TensorDesc> outs = {TensorDesc{spec.inputs[0].dtype, y}};
  if (with_indices) outs.push_back(TensorDesc{DType::i64, y});
  return outs;
}

OpCreateResult make_pool(const OpSpec& spec, PoolKind kind) {
  check_pool_input(spec, 3, kind);
  const Shape& x = spec.inputs[0].shape;
  const std::vector<int64_t> image(x.dims().begin() + 2, x.dims().end());
  const int64_t ceil_mode = spec.attrs.get_int("ceil_mode", 0);
  Window w = sliding_window(spec, parse_window_attrs(spec, image.size(), {}), image, ceil_mode != 0);
  const int64_t storage_order = spec.attrs.get_int("storage_order", 0);
  D5_CHECK_ARG(storage_order == 0 || storage_order == 1, "{}: storage_order {} must be 0 or 1", spec.label(),
               storage_order);
  const bool include_pad = spec.attrs.get_int("count_include_pad", 0) != 0;
  // Indices only when the node may ask for them (an unknown output count counts as asking).
  auto outs = pool_outputs(spec, w, kind == PoolKind::Max && spec.num_outputs != 1);
  return std::make_unique<PoolOp>(spec, std::move(outs), kind, std::move(w), include_pad, storage_order == 1);
}

OpCreateResult make_global_pool(const OpSpec& spec, PoolKind kind) {
  check_pool_input(spec, 2, kind);
  const Shape& x = spec.inputs[0].shape;
  Window w;
  w.image.assign(x.dims().begin() + 2, x.dims().end());
  w.kernel = w.image;
  const size_t r = w.image.size();
  w.positions.assign(r, 1);
  w.strides.assign(r, 1);
  w.dilations.assign(r, 1);
  w.pads_begin.assign(r, 0);
  w.pads_end.assign(r, 0);
  auto outs = pool_outputs(spec, w, false);
  return std::make_unique<PoolOp>(spec, std::move(outs), kind, std::move(w), false, false);
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  add_op(r, "MaxPool", true, [](const OpSpec& s) { return make_pool(s, PoolKind::Max); });
  add_op(r, "AveragePool", true, [](const OpSpec& s) { return make_pool(s, PoolKind::Average); });
  add_op(r, "GlobalMaxPool", true, [](const OpSpec& s) { return make_global_pool(s, PoolKind::Max); });
  add_op(r, "GlobalAveragePool", true,
         [](const OpSpec& s) { return make_global_pool(s, PoolKind::Average); });
}

}  // namespace d5::reference
