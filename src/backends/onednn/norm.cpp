// BatchNormalization, LayerNormalization and LRN on oneDNN's normalization primitives.
//
// What oneDNN does not compute is done around the primitive, in plain loops over the (small)
// statistics: BatchNormalization's running statistics in training mode, LayerNormalization's
// InvStdDev output, and the gradients that flow into x through those statistics outputs when the
// caller gives upstream gradients for them:
//   with d = the upstream gradient of a group's mean, v = that of its (biased) variance and m the
//   group size, x_i receives d / m + v * 2 (x_i - mean) / m.
#include <cmath>

#include "deep500/spi/shape_rules.h"
#include "onednn_common.h"

namespace d5::onednn {

namespace {

using flags = dnnl::normalization_flags;

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

// Adds to gx (viewed as [outer, groups, inner] with statistics per `group` index g(o, c)) the
// gradient through the statistics: dmean[g] / m + dvar[g] * 2 (x - mean[g]) / m. Either may be null.
template <typename G>
void add_statistics_gradient(const float* x, const float* mean, const float* dmean, const float* dvar,
                             double m, int64_t outer, int64_t channels, int64_t inner, G&& group, float* gx) {
#pragma omp parallel for collapse(2) if (outer * channels * inner > (1 << 16))
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t g = group(o, c), base = (o * channels + c) * inner;
      const double a = dmean ? dmean[g] / m : 0.0, b = dvar ? 2.0 * dvar[g] / m : 0.0;
      for (int64_t i = 0; i < inner; ++i)
        gx[base + i] += static_cast<float>(a + b * (static_cast<double>(x[base + i]) - mean[g]));
    }
}

// ---- BatchNormalization ---------------------------------------------------------------------
// Inference mode normalizes with input_mean/input_var (use_global_stats); training mode
// (training_mode=1) with the batch statistics, and outputs the running statistics
//   running = input_stat * momentum + batch_stat * (1 - momentum)
// with the biased batch variance, as the reference does. spatial=0 views X as [N, C*D1*..., 1]
// so each position has its own statistics.
class BatchNormOp : public OnednnOp {
 public:
  // With `io`, a forward-only variant (NativeLayoutOperator, inference mode): X in a oneDNN
  // layout is normalized in it, and Y stays in it when io keeps it.
  explicit BatchNormOp(const OpSpec& s, const IoLayouts* io = nullptr) : OnednnOp(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    training_ = s.attrs.get_int("training_mode", 0) != 0;
    momentum_ = s.attrs.get_float("momentum", 0.9);
    const float eps = static_cast<float>(s.attrs.get_float("epsilon", 1e-5));
    spatial_ = s.attrs.get_int("spatial", 1) != 0;
    n_ = x[0];
    c_ = spatial_ ? x[1] : product(x, 1, x.rank());
    inner_ = spatial_ ? product(x, 2, x.rank()) : 1;
    const memory::desc* x_in = io ? io->input(0) : nullptr;
    refuse_if(x_in && training_, "training mode reads and writes plain batch statistics");
    const auto md = x_in ? *x_in : plain({n_, c_, inner_, 1});
    const auto f = flags::use_scale | flags::use_shift | (training_ ? flags::none : flags::use_global_stats);
    const dnnl::batch_normalization_forward::primitive_desc fwd(
        {io ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training, md, eps, f}, attr(),
        engine());
    uses(fwd);
    forward_ = make_primitive<dnnl::batch_normalization_forward>(fwd);
    const auto pmd = plain({c_});
    x_ = unbound(md);
    y_port_ = port(x_in && !io->keeps(0) ? plain(dims_of(x)) : md, md, Port::Dir::out);
    y_ = y_port_.mem();
    reorders_.outputs = y_port_.reorders();
    if (x_in && io->keeps(0)) set_output_layout(0, md);
    for (auto* m : {&scale_, &shift_}) *m = unbound(pmd);
    // Training: the batch statistics live here, from forward to backward. Inference: the inputs.
    mean_ = training_ ? memory(pmd, engine()) : unbound(pmd);
    var_ = training_ ? memory(pmd, engine()) : unbound(pmd);
    forward_args_ = {{DNNL_ARG_SRC, x_},       {DNNL_ARG_DST, y_},     {DNNL_ARG_SCALE, scale_},
                     {DNNL_ARG_SHIFT, shift_}, {DNNL_ARG_MEAN, mean_}, {DNNL_ARG_VARIANCE, var_}};
    if (io) return;

    const dnnl::batch_normalization_backward::primitive_desc bwd({dnnl::prop_kind::backward, md, md, eps, f},
                                                                 attr(), engine(), fwd);
    uses(bwd, true);
    backward_ = make_primitive<dnnl::batch_normalization_backward>(bwd);
    for (auto* m : {&gy_, &gx_}) *m = unbound(md);
    for (auto* m : {&gscale_, &gshift_}) *m = unbound(pmd);
    spare_gscale_.allocate(c_);
    spare_gshift_.allocate(c_);
    // oneDNN 2.6's backward also checks that the shift it never reads is given.
    backward_args_ = {
        {DNNL_ARG_SRC, x_},       {DNNL_ARG_MEAN, mean_},         {DNNL_ARG_VARIANCE, var_},
        {DNNL_ARG_DIFF_DST, gy_}, {DNNL_ARG_SCALE, scale_},       {DNNL_ARG_SHIFT, shift_},
        {DNNL_ARG_DIFF_SRC, gx_}, {DNNL_ARG_DIFF_SCALE, gscale_}, {DNNL_ARG_DIFF_SHIFT, gshift_}};
  }

  // Inference mode over N, C and spatial axes: the primitive takes X in any layout of those.
  bool takes_layout(size_t i) const override { return i == 0 && !training_ && spatial_; }
  std::unique_ptr<OnednnOp> variant(const IoLayouts& io) const override {
    return std::make_unique<BatchNormOp>(spec_, &io);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bind_common(in);
    y_port_.out(out[0].data());
    run(forward_, forward_args_);
    y_port_.finish();
    if (!training_) return;
    const float* m = static_cast<const float*>(mean_.get_data_handle());
    const float* v = static_cast<const float*>(var_.get_data_handle());
    const float *rm = in[3].data_as<float>(), *rv = in[4].data_as<float>();
    float *om = out[1].data_as<float>(), *ov = out[2].data_as<float>();
    const auto mom = static_cast<float>(momentum_);
    for (int64_t c = 0; c < c_; ++c) {
      om[c] = rm[c] * mom + m[c] * (1 - mom);
      ov[c] = rv[c] * mom + v[c] * (1 - mom);
    }
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true, true, false, false}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (gy[0].defined()) {
      bind_common(in);
      bind(gy_, gy[0].data());
      bind(gx_, gx[0].defined() ? gx[0].data() : spare_dx_.get(spec_.inputs[0].numel()));
      bind(gscale_, gx[1].defined() ? gx[1].data() : spare_gscale_.get());
      bind(gshift_, gx[2].defined() ? gx[2].data() : spare_gshift_.get());
      run(backward_, backward_args_);
    } else {
      for (auto& g : gx)
        if (g.defined()) g.fill(0);
    }
    const bool stats_grads = training_ && gy.size() > 2 && (gy[1].defined() || gy[2].defined());
    if (!stats_grads || !gx[0].defined()) return;
    // The running statistics depend on the batch ones with slope (1 - momentum).
    std::vector<float> dmean, dvar;
    for (size_t k = 1; k < 3; ++k) {
      if (!gy[k].defined()) continue;
      auto& d = k == 1 ? dmean : dvar;
      d.assign(gy[k].data_as<float>(), gy[k].data_as<float>() + c_);
      for (float& v : d) v *= static_cast<float>(1 - momentum_);
    }
    add_statistics_gradient(
        in[0].data_as<float>(), static_cast<const float*>(mean_.get_data_handle()),
        dmean.empty() ? nullptr : dmean.data(), dvar.empty() ? nullptr : dvar.data(),
        static_cast<double>(n_ * inner_), n_, c_, inner_, [](int64_t, int64_t c) { return c; },
        gx[0].data_as<float>());
  }

  double flops() const override { return (training_ ? 7 : 4) * static_cast<double>(spec_.inputs[0].numel()); }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    auto outs = batch_norm_outputs(s);
    refuse_if(s.inputs[0].numel() == 0, "empty tensor: nothing for oneDNN to compute");
    return outs;
  }

  void bind_common(std::span<const Tensor> in) {
    bind(x_, in[0].data());
    bind(scale_, in[1].data());
    bind(shift_, in[2].data());
    if (!training_) {
      bind(mean_, in[3].data());
      bind(var_, in[4].data());
    }
  }

  bool training_ = false, spatial_ = true;
  double momentum_ = 0.9;
  int64_t n_ = 0, c_ = 0, inner_ = 0;
  Port y_port_;
  dnnl::batch_normalization_forward forward_;
  dnnl::batch_normalization_backward backward_;
  memory x_, y_, gy_, gx_, scale_, shift_, gscale_, gshift_, mean_, var_;
  Args forward_args_, backward_args_;
  SpareBuffer spare_dx_;
  Buffer spare_gscale_, spare_gshift_;  // sinks for parameter gradients the caller did not ask for
};

// ---- LayerNormalization ---------------------------------------------------------------------
// X viewed as [outer, inner] and normalized over inner = the axes from `axis` on. Outputs Y, Mean
// (written by the primitive) and InvStdDev = 1 / sqrt(variance + epsilon) (from the variance the
// primitive writes, which backward reads too).
class LayerNormOp : public OnednnOp {
 public:
  explicit LayerNormOp(const OpSpec& s) : OnednnOp(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    const size_t axis = s.inputs[0].shape.rank() - norm_rank(s);
    eps_ = static_cast<float>(s.attrs.get_float("epsilon", 1e-5));
    bias_ = s.has_input(2);
    outer_ = product(x, 0, axis);
    inner_ = product(x, axis, x.rank());
    const auto md = plain({outer_, inner_});
    const auto f = flags::use_scale | (bias_ ? flags::use_shift : flags::none);
    const dnnl::layer_normalization_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, md, eps_, f}, attr(), engine());
    const dnnl::layer_normalization_backward::primitive_desc bwd({dnnl::prop_kind::backward, md, md, eps_, f},
                                                                 attr(), engine(), fwd);
    uses(fwd);
    uses(bwd, true);
    forward_ = make_primitive<dnnl::layer_normalization_forward>(fwd);
    backward_ = make_primitive<dnnl::layer_normalization_backward>(bwd);
    for (auto* m : {&x_, &y_, &gy_, &gx_}) *m = unbound(md);
    for (auto* m : {&scale_, &shift_, &gscale_, &gshift_}) *m = unbound(plain({inner_}));
    mean_ = unbound(fwd.mean_desc());
    var_ = memory(fwd.variance_desc(), engine());  // from forward to backward
    spare_gscale_.allocate(inner_);
    forward_args_ = {{DNNL_ARG_SRC, x_},
                     {DNNL_ARG_DST, y_},
                     {DNNL_ARG_SCALE, scale_},
                     {DNNL_ARG_MEAN, mean_},
                     {DNNL_ARG_VARIANCE, var_}};
    backward_args_ = {{DNNL_ARG_SRC, x_},
                      {DNNL_ARG_MEAN, mean_},
                      {DNNL_ARG_VARIANCE, var_},
                      {DNNL_ARG_DIFF_DST, gy_},
                      {DNNL_ARG_SCALE, scale_},
                      {DNNL_ARG_DIFF_SRC, gx_},
                      {DNNL_ARG_DIFF_SCALE, gscale_}};
    if (bias_) {
      forward_args_.emplace(DNNL_ARG_SHIFT, shift_);
      backward_args_.emplace(DNNL_ARG_DIFF_SHIFT, gshift_);
      backward_args_.emplace(DNNL_ARG_SHIFT, shift_);  // oneDNN 2.6 checks it is given
      spare_gshift_.allocate(inner_);
    }
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bind_inputs(in);
    bind(y_, out[0].data());
    bind(mean_, out[1].data());
    run(forward_, forward_args_);
    const float* v = static_cast<const float*>(var_.get_data_handle());
    float* inv = out[2].data_as<float>();
    for (int64_t o = 0; o < outer_; ++o) inv[o] = 1.f / std::sqrt(v[o] + eps_);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true, bias_}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (gy[0].defined()) {
      bind_inputs(in);
      bind(mean_, out[1].data());
      bind(gy_, gy[0].data());
      bind(gx_, gx[0].defined() ? gx[0].data() : spare_dx_.get(spec_.inputs[0].numel()));
      bind(gscale_, gx[1].defined() ? gx[1].data() : spare_gscale_.get());
      if (bias_) bind(gshift_, gx[2].defined() ? gx[2].data() : spare_gshift_.get());
      run(backward_, backward_args_);
    } else {
      for (auto& g : gx)
        if (g.defined()) g.fill(0);
    }
    const bool stats_grads = gy.size() > 2 && (gy[1].defined() || gy[2].defined());
    if (!stats_grads || !gx[0].defined()) return;
    // d InvStdDev / d variance = -InvStdDev^3 / 2.
    std::vector<float> dvar;
    if (gy[2].defined()) {
      const float *g = gy[2].data_as<float>(), *inv = out[2].data_as<float>();
      dvar.resize(static_cast<size_t>(outer_));
      for (int64_t o = 0; o < outer_; ++o) dvar[o] = -0.5f * g[o] * inv[o] * inv[o] * inv[o];
    }
    add_statistics_gradient(
        in[0].data_as<float>(), out[1].data_as<float>(), gy[1].defined() ? gy[1].data_as<float>() : nullptr,
        dvar.empty() ? nullptr : dvar.data(), static_cast<double>(inner_), outer_, 1, inner_,
        [](int64_t o, int64_t) { return o; }, gx[0].data_as<float>());
  }

  double flops() const override { return 7 * static_cast<double>(spec_.inputs[0].numel()); }

 private:
  // How many trailing axes are normalized.
  static size_t norm_rank(const OpSpec& s) {
    const auto r = static_cast<int64_t>(s.inputs[0].shape.rank());
    const int64_t axis = s.attrs.get_int("axis", -1);
    D5_CHECK_ARG(axis >= -r && axis < r, "{}: axis={} is out of range for an input of rank {}", s.label(),
                 axis, r);
    return static_cast<size_t>(axis < 0 ? -axis : r - axis);
  }

  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 2 || s.inputs.size() == 3,
                 "{}: needs inputs X, Scale and optionally B, got {}", s.label(), s.inputs.size());
    const Shape& x = s.inputs[0].shape;
    D5_CHECK_ARG(x.rank() >= 1, "{}: X must have rank >= 1", s.label());
    const size_t axis = x.rank() - norm_rank(s);
    const Shape norm(std::vector<int64_t>(x.dims().begin() + static_cast<ptrdiff_t>(axis), x.dims().end()));
    const int64_t stash = s.attrs.get_int("stash_type", 1);
    D5_CHECK_ARG(stash == 1 || stash == 11, "{}: stash_type={} is not supported (1 = float, 11 = double)",
                 s.label(), stash);
    refuse_if(stash != 1, "stash_type=11: oneDNN keeps the statistics in f32");
    for (size_t i = 1; i < s.inputs.size(); ++i)
      refuse_if(
          s.has_input(i) && s.inputs[i].shape != norm,
          "input {} of shape {} is broadcast to the normalized shape {}: the primitive takes one scale and "
          "shift per normalized element",
          i, s.inputs[i].shape.to_string(), norm.to_string());
    refuse_if(x.numel() == 0, "empty tensor: nothing for oneDNN to compute");
    std::vector<int64_t> stat_dims = x.dims();
    for (size_t d = axis; d < stat_dims.size(); ++d) stat_dims[d] = 1;
    const TensorDesc stat{DType::f32, Shape(stat_dims)};
    return {s.inputs[0], stat, stat};
  }

  void bind_inputs(std::span<const Tensor> in) {
    bind(x_, in[0].data());
    bind(scale_, in[1].data());
    if (bias_) bind(shift_, in[2].data());
  }

  float eps_ = 1e-5f;
  bool bias_ = false;
  int64_t outer_ = 0, inner_ = 0;
  dnnl::layer_normalization_forward forward_;
  dnnl::layer_normalization_backward backward_;
  memory x_, y_, gy_, gx_, scale_, shift_, gscale_, gshift_, mean_, var_;
  Args forward_args_, backward_args_;
  SpareBuffer spare_dx_;
  Buffer spare_gscale_, spare_gshift_;
};

// ---- LRN --------------------------------------------------------------------------------------
// lrn_across_channels computes x / (bias + alpha / size * sum of squares)^beta over a window of
// `size` channels centred on c, ONNX's formula, when size is odd. For an even size ONNX's window
// is [c - (size-1)/2, c + size/2] while oneDNN's stays symmetric: refused. X [N, C, ...] is viewed
// as [N, C, inner, 1]: the window runs over channels only.
class LrnOp : public SingleInputOp {
 public:
  explicit LrnOp(const OpSpec& s) : SingleInputOp(s, outputs_of(s), view(s)) {
    const int64_t size = s.attrs.get_int("size");
    const auto alpha = static_cast<float>(s.attrs.get_float("alpha", 1e-4));
    const auto beta = static_cast<float>(s.attrs.get_float("beta", 0.75));
    const auto bias = static_cast<float>(s.attrs.get_float("bias", 1.0));
    const auto md = view(s);
    const auto a = dnnl::algorithm::lrn_across_channels;
    const dnnl::lrn_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, a, md, size, alpha, beta, bias}, attr(), engine());
    Args fwd_args = {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}};
    Args bwd_args = {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, gy_}, {DNNL_ARG_DIFF_SRC, gx_}};
    if (fwd.workspace_desc().get_size()) {  // kept from forward for backward
      workspace_ = memory(fwd.workspace_desc(), engine());
      fwd_args.emplace(DNNL_ARG_WORKSPACE, workspace_);
      bwd_args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    append<dnnl::lrn_forward>(forward_steps_, fwd, std::move(fwd_args), false);
    append<dnnl::lrn_backward>(
        backward_steps_,
        dnnl::lrn_backward::primitive_desc({a, md, md, size, alpha, beta, bias}, attr(), engine(), fwd),
        std::move(bwd_args), true);
    flops_ = static_cast<double>(s.inputs[0].numel()) * (2 * static_cast<double>(size) + 4);
  }

  double flops() const override { return flops_; }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 1, "{}: needs 1 input, got {}", s.label(), s.inputs.size());
    D5_CHECK_ARG(s.inputs[0].shape.rank() >= 2, "{}: X must have rank >= 2 ([N, C, ...]), got {}", s.label(),
                 s.inputs[0].shape.to_string());
    const int64_t size = s.attrs.get_int("size");
    D5_CHECK_ARG(size >= 1, "{}: size={} must be positive", s.label(), size);
    refuse_if(size % 2 == 0,
              "even size={}: ONNX's window is asymmetric ([c - {}, c + {}]), oneDNN's symmetric", size,
              (size - 1) / 2, size / 2);
    refuse_if(s.inputs[0].numel() == 0, "empty tensor: nothing for oneDNN to compute");
    return {s.inputs[0]};
  }

  static memory::desc view(const OpSpec& s) {
    const Shape& x = s.inputs.at(0).shape;
    return plain({x[0], x[1], product(x, 2, x.rank()), 1});
  }

  memory workspace_;
  double flops_ = 0;
};

}  // namespace

void register_norm_ops(OpRegistry& r) {
  add_op(
      r, "BatchNormalization", true, [](const OpSpec& s) { return std::make_unique<BatchNormOp>(s); },
      "batch_normalization primitive (use_global_stats in inference mode); running statistics of training "
      "mode computed around it; f32 only");
  add_op(
      r, "LayerNormalization", true, [](const OpSpec& s) { return std::make_unique<LayerNormOp>(s); },
      "layer_normalization primitive over the axes from 'axis' on; f32 only; refuses stash_type=11 and "
      "Scale/B that broadcast to the normalized shape");
  add_op(
      r, "LRN", true, [](const OpSpec& s) { return std::make_unique<LrnOp>(s); },
      "lrn_across_channels; f32 only; refuses even sizes (ONNX's window is then asymmetric)");
}

}  // namespace d5::onednn
