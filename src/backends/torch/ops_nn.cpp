// Conv, ConvTranspose, Gemm, MatMul and pooling on ATen.
//
// ATen pads symmetrically, and its pooling limits a pad to half the kernel. ONNX pads (explicit,
// asymmetric, or from auto_pad) beyond what ATen expresses are applied as an explicit
// constant_pad_nd of the input (Conv: only the asymmetric excess; pooling: all of it, with -inf
// for max and zeros for average), after which ATen runs unpadded:
// - average pooling then sums (divisor_override 1) and divides by a per-position count computed
//   once at creation (taps inside the image, or inside image plus pads with count_include_pad);
// - ceil_mode windows ATen would add on the padded input (it cannot tell pads from image) are cut
//   to the reference's output shape;
// - MaxPool's Indices are mapped back from the padded plane to ONNX flat indices into X
//   (row-major, or column-major spatially with storage_order=1).
// ConvTranspose runs ATen's transposed convolution with padding p = the ONNX begin pad and the
// output_padding that makes the ONNX output size, when ATen accepts that (output_padding below
// stride or dilation); otherwise unpadded, cropped (or zero-extended) by a constant_pad_nd and
// the bias added after.
#include <algorithm>
#include <limits>

#include "deep500/spi/shape_rules.h"
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// constant_pad_nd's list: last axis first, (begin, end) pairs.
std::vector<int64_t> torch_pads(const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  std::vector<int64_t> p;
  for (size_t d = begin.size(); d-- > 0;) {
    p.push_back(begin[d]);
    p.push_back(end[d]);
  }
  return p;
}

std::vector<int64_t> spatial(const Shape& s) { return {s.dims().begin() + 2, s.dims().end()}; }

c10::optional<at::Tensor> optional_input(const TensorList& in, size_t i) {
  return i < in.size() && in[i].defined() ? c10::optional<at::Tensor>(in[i]) : c10::nullopt;
}

Built build_conv(const OpSpec& s) {
  const auto image = spatial(s.inputs[0].shape);
  if (image.size() > 3) return std::string("ATen convolutions have at most 3 spatial axes");
  const Window w = sliding_window(s, parse_window_attrs(s, image.size(), spatial(s.inputs[1].shape)), image, false);
  const int64_t group = s.attrs.get_int("group", 1);
  // ATen pads min(begin, end) itself; the excess on one side is padded explicitly.
  std::vector<int64_t> sym, extra_begin, extra_end;
  bool extra = false;
  for (size_t d = 0; d < image.size(); ++d) {
    sym.push_back(std::min(w.pads_begin[d], w.pads_end[d]));
    extra_begin.push_back(w.pads_begin[d] - sym.back());
    extra_end.push_back(w.pads_end[d] - sym.back());
    extra = extra || extra_begin.back() || extra_end.back();
  }
  const auto pre_pad = extra ? torch_pads(extra_begin, extra_end) : std::vector<int64_t>{};
  const std::vector<int64_t> no_output_padding(image.size(), 0);
  return OpDef{single([=](const TensorList& in) {
                 const auto x = pre_pad.empty() ? in[0] : at::constant_pad_nd(in[0], pre_pad);
                 return at::convolution(x, in[1], optional_input(in, 2), w.strides, sym, w.dilations, false,
                                        no_output_padding, group);
               }),
               "at::convolution"};
}

Built build_conv_transpose(const OpSpec& s, const OpSemantics& ref) {
  const auto image = spatial(s.inputs[0].shape);
  const size_t r = image.size();
  if (r > 3) return std::string("ATen convolutions have at most 3 spatial axes");
  const auto out = spatial(ref.outputs[0].shape);
  const int64_t group = s.attrs.get_int("group", 1);
  // The ONNX output starts pads_begin into full0, what every input pixel's kernel reaches.
  const Window w = transposed_window(s, conv_dims(s, true));
  const std::vector<int64_t> &strides = w.strides, &dilations = w.dilations, &begin = w.pads_begin;
  std::vector<int64_t> full0(r), torch_out_pad(r);
  bool direct = true;
  for (size_t d = 0; d < r; ++d) {
    full0[d] = strides[d] * (image[d] - 1) + w.extent(d);
    torch_out_pad[d] = out[d] - (full0[d] - 2 * begin[d]);
    direct = direct && torch_out_pad[d] >= 0 && torch_out_pad[d] < std::max(strides[d], dilations[d]);
  }
  if (direct)
    return OpDef{single([=](const TensorList& in) {
                   return at::convolution(in[0], in[1], optional_input(in, 2), strides, begin, dilations,
                                          true, torch_out_pad, group);
                 }),
                 "at::convolution"};
  std::vector<int64_t> crop_begin(r), crop_end(r);
  for (size_t d = 0; d < r; ++d) {
    crop_begin[d] = -begin[d];
    crop_end[d] = out[d] + begin[d] - full0[d];  // negative: cut; positive: zeros beyond the kernels' reach
  }
  const auto crop = torch_pads(crop_begin, crop_end);
  const std::vector<int64_t> zeros(r, 0);
  std::vector<int64_t> bias_shape(r + 2, 1);
  bias_shape[1] = -1;
  return OpDef{
      single([=](const TensorList& in) {
        auto y = at::constant_pad_nd(
            at::convolution(in[0], in[1], c10::nullopt, strides, zeros, dilations, true, zeros, group), crop);
        return in.size() > 2 && in[2].defined() ? y + in[2].view(bias_shape) : y;
      }),
      "at::convolution"};
}

// Gemm: Y = alpha op(A) op(B) + beta C, C broadcast (addmm broadcasts it). Integer Gemm takes
// integer scalars (the reference has checked that alpha and beta are whole).
Built build_gemm(const OpSpec& s) {
  const bool ta = s.attrs.get_int("transA", 0) != 0, tb = s.attrs.get_int("transB", 0) != 0;
  const double alpha_f = s.attrs.get_float("alpha", 1.0), beta_f = s.attrs.get_float("beta", 1.0);
  const bool floating = is_floating(s.inputs[0].dtype);
  const at::Scalar alpha = floating ? at::Scalar(alpha_f) : at::Scalar(static_cast<int64_t>(alpha_f));
  const at::Scalar beta = floating ? at::Scalar(beta_f) : at::Scalar(static_cast<int64_t>(beta_f));
  const bool has_c = s.has_input(2), unit_alpha = alpha_f == 1.0;
  auto ops = [ta, tb](const TensorList& in) {
    return std::pair{ta ? in[0].t() : in[0], tb ? in[1].t() : in[1]};
  };
  return OpDef{[=](const Call& c) -> TensorList {
                 const auto [a, b] = ops(c.in);
                 if (has_c) {
                   if (!c.writable(0)) return {at::addmm(c.in[2], a, b, beta, alpha)};
                   at::Tensor y = c.out[0];
                   return {at::addmm_out(y, c.in[2], a, b, beta, alpha)};
                 }
                 if (!c.writable(0)) return {unit_alpha ? at::mm(a, b) : at::mm(a, b) * alpha};
                 at::Tensor y = c.out[0];
                 at::mm_out(y, a, b);
                 return {unit_alpha ? y : y.mul_(alpha)};
               },
               has_c ? "at::addmm" : "at::mm"};
}

Built build_matmul(const OpSpec& s) {
  // matmul_out computes a 1-D operand's product as a matrix and resizes the output to it: with
  // a borrowed buffer only the functional form is safe there.
  if (s.inputs[0].shape.rank() < 2 || s.inputs[1].shape.rank() < 2)
    return OpDef{single([](const TensorList& in) { return at::matmul(in[0], in[1]); }), "at::matmul"};
  return OpDef{pointwise([](const TensorList& in) { return at::matmul(in[0], in[1]); },
                         [](at::Tensor& y, const TensorList& in) { return at::matmul_out(y, in[0], in[1]); }),
               "at::matmul"};
}

// ---- pooling --------------------------------------------------------------------------------

// Narrows the spatial axes of y to `out` (ceil_mode windows past the ONNX output).
at::Tensor narrow_to(at::Tensor y, const std::vector<int64_t>& out) {
  for (size_t d = 0; d < out.size(); ++d)
    if (y.size(static_cast<int64_t>(d + 2)) != out[d]) y = y.narrow(static_cast<int64_t>(d + 2), 0, out[d]);
  return y;
}

// Pooling state shared by MaxPool and AveragePool: geometry and whether ATen's own padding will do.
struct PoolPlan {
  Window w;
  std::vector<int64_t> image, out, pre_pad;  // pre_pad empty: ATen pads (symmetric, <= kernel / 2)
  bool ceil_mode = false;
};

PoolPlan pool_plan(const OpSpec& s, const OpSemantics& ref) {
  PoolPlan p;
  p.image = spatial(s.inputs[0].shape);
  p.out = spatial(ref.outputs[0].shape);
  p.ceil_mode = s.attrs.get_int("ceil_mode", 0) != 0;
  p.w = sliding_window(s, parse_window_attrs(s, p.image.size(), {}), p.image, p.ceil_mode);
  bool aten_pads = p.w.pads_begin == p.w.pads_end;
  for (size_t d = 0; d < p.image.size(); ++d) aten_pads = aten_pads && p.w.pads_begin[d] <= p.w.kernel[d] / 2;
  if (!aten_pads) p.pre_pad = torch_pads(p.w.pads_begin, p.w.pads_end);
  return p;
}

// ONNX flat indices into X from ATen's flat indices into each (padded) plane.
at::Tensor onnx_indices(const at::Tensor& idx, const PoolPlan& p, bool column_major) {
  const size_t r = p.image.size();
  const bool padded = !p.pre_pad.empty();
  at::Tensor rest = idx, flat = at::zeros_like(idx);
  std::vector<at::Tensor> coord(r);
  for (size_t d = r; d-- > 0;) {
    const int64_t extent = p.image[d] + (padded ? p.w.pads_begin[d] + p.w.pads_end[d] : 0);
    coord[d] = rest.remainder(extent) - (padded ? p.w.pads_begin[d] : 0);
    rest = rest.div(extent, "floor");
  }
  for (size_t k = 0; k < r; ++k) {
    const size_t d = column_major ? r - 1 - k : k;
    flat = flat * p.image[d] + coord[d];
  }
  int64_t plane = 1;
  for (int64_t e : p.image) plane *= e;
  const int64_t planes = idx.size(0) * idx.size(1);
  std::vector<int64_t> base_shape(r + 2, 1);
  base_shape[0] = idx.size(0);
  base_shape[1] = idx.size(1);
  return flat + at::arange(planes, idx.options()).mul(plane).view(base_shape);
}

TensorList max_pool(const at::Tensor& x, const PoolPlan& p, const std::vector<int64_t>& pads) {
  switch (p.image.size()) {
    case 1: {
      auto [y, i] = at::max_pool1d_with_indices(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
      return {y, i};
    }
    case 2: {
      auto [y, i] = at::max_pool2d_with_indices(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
      return {y, i};
    }
    default: {
      auto [y, i] = at::max_pool3d_with_indices(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
      return {y, i};
    }
  }
}

at::Tensor max_pool_values(const at::Tensor& x, const PoolPlan& p, const std::vector<int64_t>& pads) {
  switch (p.image.size()) {
    case 1:
      return at::max_pool1d(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
    case 2:
      return at::max_pool2d(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
    default:
      return at::max_pool3d(x, p.w.kernel, p.w.strides, pads, p.w.dilations, p.ceil_mode);
  }
}

Built build_max_pool(const OpSpec& s, const OpSemantics& ref) {
  if (spatial(s.inputs[0].shape).size() > 3)
    return std::string("ATen max pooling has at most 3 spatial axes");
  const PoolPlan p = pool_plan(s, ref);
  const bool column_major = s.attrs.get_int("storage_order", 0) == 1;
  const bool indices = ref.outputs.size() > 1;  // the reference's choice, from num_outputs
  const auto type = scalar_type(s.inputs[0].dtype);
  return OpDef{[=](const Call& c) -> TensorList {
                 // ATen pools floating types only; int8/uint8 values are exact in float.
                 at::Tensor x = at::isFloatingType(type) ? c.in[0] : c.in[0].to(at::kFloat);
                 std::vector<int64_t> pads = p.w.pads_begin;
                 if (!p.pre_pad.empty()) {
                   x = at::constant_pad_nd(x, p.pre_pad, -std::numeric_limits<double>::infinity());
                   pads.assign(pads.size(), 0);
                 }
                 // Without a reader of Indices (a graph executor's node that leaves it unnamed),
                 // the values-only pooling saves the index tensor and its ONNX mapping.
                 if (c.wanted.size() > 1 && !c.wanted[1]) return {narrow_to(max_pool_values(x, p, pads), p.out), {}};
                 const auto r = max_pool(x, p, pads);
                 if (!indices) return {narrow_to(r[0], p.out)};
                 return {narrow_to(r[0], p.out), onnx_indices(narrow_to(r[1], p.out), p, column_major)};
               },
               "at::max_pool" + std::to_string(p.image.size()) + "d_with_indices"};
}

at::Tensor avg_pool(const at::Tensor& x, const PoolPlan& p, const std::vector<int64_t>& pads,
                    bool include_pad, c10::optional<int64_t> divisor) {
  if (p.image.size() == 1)  // avg_pool1d has no divisor_override: pool 1-D as [1, L] images
    return at::avg_pool2d(x.unsqueeze(2), {1, p.w.kernel[0]}, {1, p.w.strides[0]}, {0, pads[0]}, p.ceil_mode,
                          include_pad, divisor)
        .squeeze(2);
  if (p.image.size() == 2)
    return at::avg_pool2d(x, p.w.kernel, p.w.strides, pads, p.ceil_mode, include_pad, divisor);
  return at::avg_pool3d(x, p.w.kernel, p.w.strides, pads, p.ceil_mode, include_pad, divisor);
}

Built build_avg_pool(const OpSpec& s, const OpSemantics& ref) {
  if (spatial(s.inputs[0].shape).size() > 3)
    return std::string("ATen average pooling has at most 3 spatial axes");
  const PoolPlan p = pool_plan(s, ref);
  for (int64_t d : p.w.dilations)
    if (d != 1) return std::string("ATen average pooling has no dilations");
  const bool include_pad = s.attrs.get_int("count_include_pad", 0) != 0;
  if (p.pre_pad.empty())
    return OpDef{single([=](const TensorList& in) {
                   return avg_pool(in[0], p, p.w.pads_begin, include_pad, c10::nullopt);
                 }),
                 "at::avg_pool"};
  // Sums over the zero-padded input divided by each window's count, pooled once from a mask: 1
  // inside the image (and, with count_include_pad, inside its pads), 0 elsewhere.
  const std::vector<int64_t> no_pads(p.image.size(), 0);
  const auto options = at::TensorOptions().dtype(scalar_type(s.inputs[0].dtype));
  std::vector<int64_t> plane = {1, 1};
  plane.insert(plane.end(), p.image.begin(), p.image.end());
  const auto mask = include_pad ? at::constant_pad_nd(at::ones(plane, options), p.pre_pad, 1.0)
                                : at::constant_pad_nd(at::ones(plane, options), p.pre_pad, 0.0);
  const HostConstant count(narrow_to(avg_pool(mask, p, no_pads, true, 1), p.out));
  return OpDef{single([=](const TensorList& in) {
                 const auto sum = avg_pool(at::constant_pad_nd(in[0], p.pre_pad), p, no_pads, true, 1);
                 return narrow_to(sum, p.out) / count.on(sum.device());
               }),
               "at::avg_pool"};
}

// Global pools: one window over all spatial axes. GlobalMaxPool's replay takes the first maximum
// of each plane (at::max over the flattened plane), as the reference routes the gradient.
Built build_global_pool(const OpSpec& s, const OpSemantics& ref, bool max) {
  const auto out = dims_of(ref.outputs[0].shape);
  std::vector<int64_t> axes;
  for (size_t d = 2; d < s.inputs[0].shape.rank(); ++d) axes.push_back(static_cast<int64_t>(d));
  if (axes.empty())  // [N, C]: each plane is one element
    return OpDef{single([](const TensorList& in) { return in[0]; }), "at::alias"};
  if (!max)
    return OpDef{
        pointwise([=](const TensorList& in) { return at::mean(in[0], axes, true); },
                  [=](at::Tensor& y, const TensorList& in) { return at::mean_out(y, in[0], axes, true); }),
        "at::mean"};
  return OpDef{[=](const Call& c) -> TensorList {
                 const auto& x = c.in[0];
                 if (c.replay || !c.writable(0)) return {std::get<0>(at::max(x.flatten(2), -1)).view(out)};
                 at::Tensor y = c.out[0];
                 return {at::amax_out(y, x, axes, true)};
               },
               "at::amax"};
}

}  // namespace

// Einsum: at::einsum with ONNX's equation as it is (both follow numpy: implicit output,
// ellipsis broadcasting, repeated letters as diagonals).
Built build_einsum(const OpSpec& s) {
  const std::string equation = s.attrs.get_string("equation");
  return OpDef{single([equation](const TensorList& in) { return at::einsum(equation, in); }), "at::einsum"};
}

void register_nn_ops(OpRegistry& r) {
  add_torch_op(
      r, "Conv", true, [](const OpSpec& s, const OpSemantics&) { return build_conv(s); },
      "f32, f64; 1-3 spatial axes; asymmetric pads by explicit padding");
  add_torch_op(
      r, "ConvTranspose", true,
      [](const OpSpec& s, const OpSemantics& ref) { return build_conv_transpose(s, ref); },
      "f32, f64; 1-3 spatial axes; output_shape, output_padding, auto_pad");
  add_torch_op(
      r, "Gemm", true, [](const OpSpec& s, const OpSemantics&) { return build_gemm(s); }, "f32, f64, i32, i64");
  add_torch_op(
      r, "MatMul", true, [](const OpSpec& s, const OpSemantics&) { return build_matmul(s); },
      "f32, f64, i32, i64; NumPy batching");
  add_torch_op(
      r, "Einsum", true, [](const OpSpec& s, const OpSemantics&) { return build_einsum(s); }, "f32, f64");
  add_torch_op(
      r, "MaxPool", true, [](const OpSpec& s, const OpSemantics& ref) { return build_max_pool(s, ref); },
      "f32, f64, i8, u8; 1-3 spatial axes; Indices with storage_order");
  add_torch_op(
      r, "AveragePool", true, [](const OpSpec& s, const OpSemantics& ref) { return build_avg_pool(s, ref); },
      "f32, f64; 1-3 spatial axes; no dilations");
  add_torch_op(
      r, "GlobalAveragePool", true,
      [](const OpSpec& s, const OpSemantics& ref) { return build_global_pool(s, ref, false); }, "f32, f64");
  add_torch_op(
      r, "GlobalMaxPool", true,
      [](const OpSpec& s, const OpSemantics& ref) { return build_global_pool(s, ref, true); },
      "f32, f64, i8, u8; gradient to the first maximum");
}

}  // namespace d5::torch_backend
