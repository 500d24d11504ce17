// Normalization and softmax operators on ATen: BatchNormalization (inference and training with
// ONNX running statistics), InstanceNormalization, LayerNormalization (with its Mean and
// InvStdDev outputs), LRN, Softmax and LogSoftmax.
//
// The fused ATen kernels (batch_norm, native_layer_norm, instance_norm) have autograd formulas
// for their main output only: they ignore upstream gradients of the statistics they return. When
// the backward replay has such gradients (BatchNormalization's running mean/var, LayerNorm's
// Mean/InvStdDev), it computes the statistics with var_mean and normalizes with element-wise
// ops, so autograd carries those gradients into X.
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// Softmax and LogSoftmax along one axis (opset 13+), or over all trailing axes of the input
// coerced to 2-D (before opset 13).
Built build_softmax(const OpSpec& s, bool log) {
  const Shape& x = s.inputs[0].shape;
  const bool coerce_2d = s.opset < 13;
  const int64_t axis = axis_in(s.attrs.get_int("axis", coerce_2d ? 1 : -1), x.rank());
  std::vector<int64_t> view = dims_of(x);
  int64_t dim = axis;
  if (coerce_2d) {
    const auto a = static_cast<size_t>(axis);
    view = {Shape(std::vector<int64_t>(x.dims().begin(), x.dims().begin() + a)).numel(),
            Shape(std::vector<int64_t>(x.dims().begin() + a, x.dims().end())).numel()};
    dim = 1;
  }
  return OpDef{pointwise(
                   [=](const TensorList& in) {
                     const auto v = in[0].reshape(view);
                     return (log ? at::log_softmax(v, dim) : at::softmax(v, dim)).reshape(in[0].sizes());
                   },
                   [=](at::Tensor& y, const TensorList& in) {
                     at::Tensor yv = y.view(view);
                     log ? at::_log_softmax_out(yv, in[0].view(view), dim, false)
                         : at::_softmax_out(yv, in[0].view(view), dim, false);
                     return y;
                   }),
               log ? "at::_log_softmax" : "at::_softmax"};
}

// [1, C, 1, ...]: a per-channel vector broadcast against [N, C, ...].
std::vector<int64_t> channel_shape(int64_t channels, size_t rank) {
  std::vector<int64_t> d(rank, 1);
  d[1] = channels;
  return d;
}

// Mean and biased variance over `dims` (keepdim), for the differentiable formulation.
std::pair<at::Tensor, at::Tensor> mean_var(const at::Tensor& x, at::IntArrayRef dims, bool keepdim) {
  auto [var, mean] = at::var_mean(x, dims, c10::optional<int64_t>(0), keepdim);
  return {mean, var};
}

// ONNX BatchNormalization. Training mode (training_mode=1, opset 14+) normalizes with the batch
// statistics and outputs running = input_stat * momentum + batch_stat * (1 - momentum), both with
// the biased variance, as the reference does (PyTorch's own running variance is unbiased and its
// momentum the complement). spatial=0 (opset < 9): every position of [C, D1, ...] is a channel.
Built build_batch_norm(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const bool training = s.attrs.get_int("training_mode", 0) != 0;
  const bool spatial = s.attrs.get_int("spatial", 1) != 0;
  const double eps = s.attrs.get_float("epsilon", 1e-5), momentum = s.attrs.get_float("momentum", 0.9);
  // Spatial=0 normalizes x viewed as [N, C*D1*...] with flattened parameters.
  const std::vector<int64_t> x_view =
      spatial ? dims_of(xs) : std::vector<int64_t>{xs[0], xs.numel() / std::max<int64_t>(1, xs[0])};
  const int64_t channels = x_view[1];
  std::vector<int64_t> reduce;
  for (size_t d = 0; d < x_view.size(); ++d)
    if (d != 1) reduce.push_back(static_cast<int64_t>(d));
  const auto bshape = channel_shape(channels, x_view.size());
  const auto x_sizes = dims_of(xs);

  if (!training)
    return OpDef{single([=](const TensorList& in) {
                   return at::batch_norm(in[0].view(x_view), in[1].reshape({channels}),
                                         in[2].reshape({channels}), in[3].reshape({channels}),
                                         in[4].reshape({channels}), false, 0.0, eps, false)
                       .view(x_sizes);
                 }),
                 "at::batch_norm"};

  return OpDef{[=](const Call& c) -> TensorList {
                 const auto x = c.in[0].view(x_view);
                 const auto w = c.in[1].reshape({channels}), b = c.in[2].reshape({channels});
                 if (c.replay && !c.wanted[1] && !c.wanted[2])  // running outputs unused: ATen's fused kernel
                   return {std::get<0>(at::native_batch_norm(x, w, b, {}, {}, true, 0.0, eps)).view(x_sizes),
                           c.in[3], c.in[4]};
                 auto [mean, var] = mean_var(x, reduce, false);
                 at::Tensor y;
                 if (c.replay)
                   y = (x - mean.view(bshape)) * at::rsqrt(var.view(bshape) + eps) * w.view(bshape) +
                       b.view(bshape);
                 else
                   y = at::batch_norm(x, w, b, mean, var, false, 0.0, eps, false);
                 const auto run_mean = c.in[3] * momentum + mean.view(c.in[3].sizes()) * (1 - momentum);
                 const auto run_var = c.in[4] * momentum + var.view(c.in[4].sizes()) * (1 - momentum);
                 return {y.view(x_sizes), run_mean, run_var};
               },
               "at::batch_norm"};
}

Built build_instance_norm(const OpSpec& s) {
  const double eps = s.attrs.get_float("epsilon", 1e-5);
  return OpDef{single([eps](const TensorList& in) {
                 return at::instance_norm(in[0], in[1], in[2], {}, {}, true, 0.0, eps, false);
               }),
               "at::instance_norm"};
}

// LayerNormalization over axes [axis, rank); Scale and B broadcast to those axes; Mean and
// InvStdDev keep X's rank (normalized axes 1) in the stash_type dtype (converted on copy).
Built build_layer_norm(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const auto axis = static_cast<size_t>(axis_in(s.attrs.get_int("axis", -1), xs.rank()));
  const double eps = s.attrs.get_float("epsilon", 1e-5);
  const std::vector<int64_t> norm(xs.dims().begin() + static_cast<ptrdiff_t>(axis), xs.dims().end());
  std::vector<int64_t> dims;
  for (size_t d = axis; d < xs.rank(); ++d) dims.push_back(static_cast<int64_t>(d));
  const bool bias = s.has_input(2);
  auto param = [norm](const at::Tensor& p) {
    return p.sizes() == at::IntArrayRef(norm) ? p : p.expand(norm).contiguous();
  };
  return OpDef{[=](const Call& c) -> TensorList {
                 const auto& x = c.in[0];
                 const auto w = param(c.in[1]);
                 const auto b = bias ? param(c.in[2]) : at::Tensor();
                 if (c.replay && (c.wanted[1] || c.wanted[2])) {
                   auto [mean, var] = mean_var(x, dims, true);
                   const auto rstd = at::rsqrt(var + eps);
                   auto y = (x - mean) * rstd * w;
                   return {bias ? y + b : y, mean, rstd};
                 }
                 auto [y, mean, rstd] = at::native_layer_norm(x, norm, w, b, eps);
                 return {y, mean, rstd};
               },
               "at::native_layer_norm"};
}

// LRN: square_sum over the channel window [c - floor((size-1)/2), c + ceil((size-1)/2)] as an
// average pool (divisor `size`) over the squares padded with zeros, then x / (bias + alpha *
// average)^beta. (PyTorch's LocalResponseNorm places an even window the other way round.)
Built build_lrn(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const int64_t size = s.attrs.get_int("size");
  const double alpha = s.attrs.get_float("alpha", 1e-4), beta = s.attrs.get_float("beta", 0.75),
               bias = s.attrs.get_float("bias", 1.0);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const int64_t inner = xs.numel() / std::max<int64_t>(1, xs[0] * xs[1]);
  const std::vector<int64_t> view = {xs[0], 1, xs[1], inner};
  return OpDef{single([=](const TensorList& in) {
                 const auto x = in[0].reshape(view);
                 const auto sq = at::constant_pad_nd(x * x, {0, 0, before, after});
                 const auto avg = at::avg_pool2d(sq, {size, 1}, {1, 1});
                 return (x * at::pow(avg * alpha + bias, -beta)).reshape(in[0].sizes());
               }),
               "at::avg_pool2d"};
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  add_torch_op(
      r, "Softmax", true, [](const OpSpec& s, const OpSemantics&) { return build_softmax(s, false); },
      "f32, f64; opset < 13 coerces to 2-D");
  add_torch_op(
      r, "LogSoftmax", true, [](const OpSpec& s, const OpSemantics&) { return build_softmax(s, true); },
      "f32, f64; opset < 13 coerces to 2-D");
  add_torch_op(
      r, "BatchNormalization", true, [](const OpSpec& s, const OpSemantics&) { return build_batch_norm(s); },
      "f32, f64; training mode with ONNX running statistics (biased variance)");
  add_torch_op(
      r, "InstanceNormalization", true,
      [](const OpSpec& s, const OpSemantics&) { return build_instance_norm(s); }, "f32, f64");
  add_torch_op(
      r, "LayerNormalization", true, [](const OpSpec& s, const OpSemantics&) { return build_layer_norm(s); },
      "f32, f64; Mean/InvStdDev outputs with gradients");
  add_torch_op(
      r, "LRN", true, [](const OpSpec& s, const OpSemantics&) { return build_lrn(s); },
      "f32, f64; ONNX window placement (even sizes reach one channel further forward)");
}

}  // namespace d5::torch_backend
