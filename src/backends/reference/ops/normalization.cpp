// Normalization operators: BatchNormalization, InstanceNormalization, LayerNormalization (this
// file) and LRN (lrn.cpp). The first three share one kernel: the input is viewed as
// [outer, channels, inner] and normalized over groups of elements, then mapped by a scale and a
// bias. BatchNormalization groups each channel across the batch, InstanceNormalization each
// (sample, channel), LayerNormalization each row of the trailing axes (channels = 1).
#include <cmath>

#include "norm_common.h"

namespace d5::reference {

namespace {

struct Geometry {
  int64_t outer = 1, channels = 1, inner = 1;
  bool across_outer = false;      // a group spans every sample (batch statistics)
  bool params_per_inner = false;  // scale/bias index by inner position (LayerNorm), else by channel

  int64_t groups() const { return across_outer ? channels : outer * channels; }
  int64_t group_size() const { return across_outer ? outer * inner : inner; }
  int64_t params() const { return params_per_inner ? inner : channels; }
  // Visits every element in memory order: f(flat index, group, parameter index).
  template <typename F>
  void for_each(F&& f) const {
    int64_t idx = 0;
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t c = 0; c < channels; ++c) {
        const auto g = static_cast<size_t>(across_outer ? c : a * channels + c);
        for (int64_t b = 0; b < inner; ++b, ++idx) f(idx, g, static_cast<size_t>(params_per_inner ? b : c));
      }
  }
};

// Mean and biased variance of each group, in double; two passes so that a large mean does not
// cancel the variance away.
template <typename T>
void group_stats(const Geometry& geo, const T* x, std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(static_cast<size_t>(geo.groups()), 0.0);
  var.assign(mean.size(), 0.0);
  const auto m = static_cast<double>(geo.group_size());
  geo.for_each([&](int64_t i, size_t g, size_t) { mean[g] += static_cast<double>(x[i]); });
  for (double& v : mean) v /= m;
  geo.for_each([&](int64_t i, size_t g, size_t) {
    const double d = static_cast<double>(x[i]) - mean[g];
    var[g] += d * d;
  });
  for (double& v : var) v /= m;
}

std::vector<double> inverse_std(const std::vector<double>& var, double epsilon) {
  std::vector<double> r(var.size());
  for (size_t g = 0; g < var.size(); ++g) r[g] = 1 / std::sqrt(var[g] + epsilon);
  return r;
}

// The normalized input and its statistics, as the last forward saw them.
struct Normalized {
  std::vector<double> mean, invstd, scale, bias;
};

template <typename T>
void normalize(const Geometry& geo, const T* x, T* y, const Normalized& n) {
  geo.for_each([&](int64_t i, size_t g, size_t p) {
    y[i] = static_cast<T>((static_cast<double>(x[i]) - n.mean[g]) * n.invstd[g] * n.scale[p] + n.bias[p]);
  });
}

// Upstream gradients of the statistics themselves (per group, empty when none), for outputs
// that expose them: BatchNormalization's running mean/var, LayerNormalization's Mean/InvStdDev.
struct StatGrads {
  std::vector<double> dmean, dvar;
};

// With xhat = (x - mean) * invstd and y = xhat * scale + bias. When the statistics were computed
// from x (through_stats), dx also flows through them:
//   dx = invstd * (gh - mean(gh) - xhat * mean(gh * xhat)) + dmean / m + dvar * 2 (x - mean) / m
// with gh = dy * scale and m the group size; with fixed statistics dx = gh * invstd.
template <typename T>
void normalize_backward(const Geometry& geo, const T* x, const T* gy, const Normalized& n, bool through_stats,
                        const StatGrads& sg, T* gx, std::vector<double>& dscale, std::vector<double>& dbias) {
  dscale.assign(static_cast<size_t>(geo.params()), 0.0);
  dbias.assign(dscale.size(), 0.0);
  std::vector<double> sum_gh(static_cast<size_t>(geo.groups()), 0.0), sum_gh_xhat(sum_gh.size(), 0.0);
  auto xhat = [&](int64_t i, size_t g) { return (static_cast<double>(x[i]) - n.mean[g]) * n.invstd[g]; };
  if (gy) {
    geo.for_each([&](int64_t i, size_t g, size_t p) {
      const double dy = static_cast<double>(gy[i]), xh = xhat(i, g);
      dscale[p] += dy * xh;
      dbias[p] += dy;
      sum_gh[g] += dy * n.scale[p];
      sum_gh_xhat[g] += dy * n.scale[p] * xh;
    });
  }
  if (!gx) return;
  const auto m = static_cast<double>(geo.group_size());
  geo.for_each([&](int64_t i, size_t g, size_t p) {
    const double gh = gy ? static_cast<double>(gy[i]) * n.scale[p] : 0.0;
    double d = gh * n.invstd[g];
    if (through_stats) {
      d = n.invstd[g] * (gh - (sum_gh[g] + xhat(i, g) * sum_gh_xhat[g]) / m);
      if (!sg.dmean.empty()) d += sg.dmean[g] / m;
      if (!sg.dvar.empty()) d += sg.dvar[g] * 2 * (static_cast<double>(x[i]) - n.mean[g]) / m;
    }
    gx[i] = static_cast<T>(d);
  });
}

// A scale/bias input's values expanded to one per position of `param_shape` (LayerNormalization
// broadcasts them over the normalized axes).
std::vector<double> expand_param(const Tensor& t, const Shape& param_shape) {
  std::vector<double> v(static_cast<size_t>(param_shape.numel()));
  BroadcastMap(t.shape(), param_shape).for_each([&](int64_t o, int64_t i) {
    v[static_cast<size_t>(o)] = t.get(i);
  });
  return v;
}

// The inverse of expand_param for gradients: sums per-position values into the input's shape.
void fold_param(const std::vector<double>& full, const Shape& param_shape, Tensor& grad) {
  if (!grad.defined()) return;
  std::vector<double> acc(static_cast<size_t>(grad.numel()), 0.0);
  BroadcastMap(grad.shape(), param_shape).for_each([&](int64_t o, int64_t i) {
    acc[static_cast<size_t>(i)] += full[static_cast<size_t>(o)];
  });
  for (size_t i = 0; i < acc.size(); ++i) grad.set(static_cast<int64_t>(i), acc[i]);
}

const Tensor* defined_or_null(std::span<const Tensor> ts, size_t i) {
  return i < ts.size() && ts[i].defined() ? &ts[i] : nullptr;
}

// Base of the three: owns the geometry, the saved statistics and the typed kernels.
class GroupNormBase : public ReferenceOp {
 public:
  double flops() const override {
    const auto n = static_cast<double>(spec_.inputs[0].numel());
    return (through_stats_ ? 7 : 4) * n;  // statistics (when computed) plus subtract, scale and shift
  }

 protected:
  GroupNormBase(const OpSpec& s, std::vector<TensorDesc> outs) : ReferenceOp(s, std::move(outs)) {}

  // x: input 0; the statistics must already be in norm_.
  void run_normalize(const Tensor& x, Tensor& y) {
    dispatch_float(x.dtype(), spec_,
                   [&]<typename T>() { normalize(geo_, x.data_as<T>(), y.data_as<T>(), norm_); });
    ran_forward_ = true;
  }
  void compute_stats(const Tensor& x, std::vector<double>& var) {
    dispatch_float(x.dtype(), spec_,
                   [&]<typename T>() { group_stats(geo_, x.data_as<T>(), norm_.mean, var); });
  }
  void run_backward(const Tensor& x, const Tensor* gy, const StatGrads& sg, Tensor& gx, Tensor& gscale,
                    Tensor& gbias, const Shape& param_shape) {
    D5_CHECK(ran_forward_, InvalidArgument, "{}: backward called before forward", spec_.label());
    std::vector<double> dscale, dbias;
    dispatch_float(x.dtype(), spec_, [&]<typename T>() {
      normalize_backward(geo_, x.data_as<T>(), gy ? gy->data_as<T>() : nullptr, norm_, through_stats_, sg,
                         gx.defined() ? gx.data_as<T>() : nullptr, dscale, dbias);
    });
    fold_param(dscale, param_shape, gscale);
    fold_param(dbias, param_shape, gbias);
  }

  Geometry geo_;
  Normalized norm_;
  bool through_stats_ = true;
  bool ran_forward_ = false;
};

// ---- BatchNormalization ---------------------------------------------------------------------
// Inference mode normalizes with input_mean/input_var. Training mode (opset 14+ training_mode=1)
// uses the batch mean and biased variance and also outputs the running statistics
//   running = input_stat * momentum + batch_stat * (1 - momentum)
// as the ONNX reference implementation does (np.var, biased, for both). Opset < 14 models
// cannot be told apart from inference ones without the output count, so they run in inference
// mode, which is what exporters emit for them. spatial=0 (opset < 9) gives each position of
// [C, D1, ...] its own statistics.
class BatchNormOp : public GroupNormBase {
 public:
  explicit BatchNormOp(const OpSpec& s) : GroupNormBase(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    training_ = s.attrs.get_int("training_mode", 0) != 0;
    spatial_ = s.attrs.get_int("spatial", 1) != 0;
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    momentum_ = s.attrs.get_float("momentum", 0.9);
    geo_.outer = x[0];
    geo_.channels = spatial_ ? x[1] : dims_product(x, 1, x.rank());
    geo_.inner = spatial_ ? dims_product(x, 2, x.rank()) : 1;
    geo_.across_outer = true;
    through_stats_ = training_;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    norm_.scale = expand_param(in[1], in[1].shape());
    norm_.bias = expand_param(in[2], in[2].shape());
    std::vector<double> var;
    if (training_) {
      compute_stats(in[0], var);
      for (size_t c = 0; c < var.size(); ++c) {
        const auto ci = static_cast<int64_t>(c);
        out[1].set(ci, in[3].get(ci) * momentum_ + norm_.mean[c] * (1 - momentum_));
        out[2].set(ci, in[4].get(ci) * momentum_ + var[c] * (1 - momentum_));
      }
    } else {
      norm_.mean = expand_param(in[3], in[3].shape());
      var = expand_param(in[4], in[4].shape());
    }
    norm_.invstd = inverse_std(var, epsilon_);
    run_normalize(in[0], out[0]);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true, true, false, false}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    StatGrads sg;
    if (training_) {
      // The running statistics depend on the batch ones with slope (1 - momentum).
      for (size_t k = 0; k < 2; ++k) {
        const Tensor* g = defined_or_null(gy, k + 1);
        if (!g) continue;
        auto& dst = k == 0 ? sg.dmean : sg.dvar;
        dst = expand_param(*g, g->shape());
        for (double& v : dst) v *= 1 - momentum_;
      }
    }
    run_backward(in[0], defined_or_null(gy, 0), sg, gx[0], gx[1], gx[2], in[1].shape());
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    auto outs = batch_norm_outputs(s);
    check_float_input(s, 0, "X");
    dispatch_float(s.inputs[0].dtype, s, []<typename T>() {});
    return outs;
  }

  bool training_ = false, spatial_ = true;
  double epsilon_ = 1e-5, momentum_ = 0.9;
};

// ---- InstanceNormalization ------------------------------------------------------------------
class InstanceNormOp : public GroupNormBase {
 public:
  explicit InstanceNormOp(const OpSpec& s) : GroupNormBase(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    geo_.outer = x[0];
    geo_.channels = x[1];
    geo_.inner = dims_product(x, 2, x.rank());
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    norm_.scale = expand_param(in[1], in[1].shape());
    norm_.bias = expand_param(in[2], in[2].shape());
    std::vector<double> var;
    compute_stats(in[0], var);
    norm_.invstd = inverse_std(var, epsilon_);
    run_normalize(in[0], out[0]);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true, true}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    run_backward(in[0], defined_or_null(gy, 0), {}, gx[0], gx[1], gx[2], in[1].shape());
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 3, "{}: needs 3 inputs (input, scale, B), got {}", s.label(),
                 s.inputs.size());
    check_float_input(s, 0, "input");
    dispatch_float(s.inputs[0].dtype, s, []<typename T>() {});
    const Shape& x = s.inputs[0].shape;
    D5_CHECK_ARG(x.rank() >= 3, "{}: input must have rank >= 3 ([N, C, D1, ...]), got {}", s.label(),
                 x.to_string());
    check_param_shape(s, 1, "scale", Shape{x[1]});
    check_param_shape(s, 2, "B", Shape{x[1]});
    return {s.inputs[0]};
  }

  double epsilon_ = 1e-5;
};

// ---- LayerNormalization ---------------------------------------------------------------------
// Normalizes over axes [axis, rank). Scale and B broadcast (unidirectionally) to those axes.
// Mean and InvStdDev have X's shape with the normalized axes set to 1, in the stash_type dtype
// (1 = float; 11 = double is also accepted, as ONNX Runtime does).
class LayerNormOp : public GroupNormBase {
 public:
  explicit LayerNormOp(const OpSpec& s) : GroupNormBase(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    const size_t axis = checked_axis(s, s.attrs.get_int("axis", -1), x.rank());
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    geo_.outer = dims_product(x, 0, axis);
    geo_.inner = dims_product(x, axis, x.rank());
    geo_.params_per_inner = true;
    norm_shape_ =
        Shape(std::vector<int64_t>(x.dims().begin() + static_cast<ptrdiff_t>(axis), x.dims().end()));
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    norm_.scale = expand_param(in[1], norm_shape_);
    norm_.bias = has_bias() ? expand_param(in[2], norm_shape_) : std::vector<double>(norm_.scale.size(), 0.0);
    std::vector<double> var;
    compute_stats(in[0], var);
    norm_.invstd = inverse_std(var, epsilon_);
    for (size_t g = 0; g < var.size(); ++g) {
      out[1].set(static_cast<int64_t>(g), norm_.mean[g]);
      out[2].set(static_cast<int64_t>(g), norm_.invstd[g]);
    }
    run_normalize(in[0], out[0]);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true, has_bias()}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    StatGrads sg;
    if (const Tensor* g = defined_or_null(gy, 1)) sg.dmean = expand_param(*g, g->shape());
    if (const Tensor* g = defined_or_null(gy, 2)) {
      // d invstd / d var = -invstd^3 / 2
      sg.dvar = expand_param(*g, g->shape());
      for (size_t k = 0; k < sg.dvar.size(); ++k) sg.dvar[k] *= -0.5 * std::pow(norm_.invstd.at(k), 3);
    }
    Tensor none;
    run_backward(in[0], defined_or_null(gy, 0), sg, gx[0], gx[1], has_bias() ? gx[2] : none, norm_shape_);
  }

 private:
  bool has_bias() const { return spec_.has_input(2); }

  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 2 || s.inputs.size() == 3,
                 "{}: needs inputs X, Scale and optionally B, got {}", s.label(), s.inputs.size());
    check_float_input(s, 0, "X");
    dispatch_float(s.inputs[0].dtype, s, []<typename T>() {});
    const Shape& x = s.inputs[0].shape;
    D5_CHECK_ARG(x.rank() >= 1, "{}: X must have rank >= 1", s.label());
    const size_t axis = checked_axis(s, s.attrs.get_int("axis", -1), x.rank());
    const Shape norm(std::vector<int64_t>(x.dims().begin() + static_cast<ptrdiff_t>(axis), x.dims().end()));
    const char* names[] = {"X", "Scale", "B"};
    for (size_t i = 1; i < s.inputs.size(); ++i) {
      if (i == 2 && !s.has_input(2)) continue;
      check_float_input(s, i, names[i]);
      const Shape& p = s.inputs[i].shape;
      bool ok = p.rank() <= norm.rank();
      for (size_t d = 0; ok && d < p.rank(); ++d) {
        const int64_t want = norm[norm.rank() - p.rank() + d];
        ok = p[d] == want || p[d] == 1;
      }
      D5_CHECK_ARG(ok,
                   "{}: input {} ({}) of shape {} does not broadcast to the normalized shape {} (axis {})",
                   s.label(), i, names[i], p.to_string(), norm.to_string(), axis);
    }
    const int64_t stash = s.attrs.get_int("stash_type", 1);
    D5_CHECK_ARG(stash == 1 || stash == 11, "{}: stash_type={} is not supported (1 = float, 11 = double)",
                 s.label(), stash);
    std::vector<int64_t> stat_dims = x.dims();
    for (size_t d = axis; d < stat_dims.size(); ++d) stat_dims[d] = 1;
    const TensorDesc stat{stash == 1 ? DType::f32 : DType::f64, Shape(stat_dims), Layout::any};
    return {s.inputs[0], stat, stat};
  }

  double epsilon_ = 1e-5;
  Shape norm_shape_;
};

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  add_op(r, "BatchNormalization", true, make<BatchNormOp>);
  add_op(r, "InstanceNormalization", true, make<InstanceNormOp>);
  add_op(r, "LayerNormalization", true, make<LayerNormOp>);
  register_lrn_op(r);
}

}  // namespace d5::reference
