// The sliding-window rules of convolution and pooling (deep500/spi/shape_rules.h).
#include <fmt/ranges.h>  // messages print attribute lists

#include <algorithm>
#include <numeric>

#include "deep500/core/error.h"
#include "deep500/spi/shape_rules.h"

namespace d5 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

int64_t Window::image_size() const { return product(image); }
int64_t Window::position_count() const { return product(positions); }
int64_t Window::kernel_size() const { return product(kernel); }

int64_t taps_in_image(const Window& w) {
  // Whether a tap lies in the image is decided per axis, so the count is a product of sums.
  int64_t total = 1;
  for (size_t d = 0; d < w.rank(); ++d) {
    int64_t inside = 0;
    for (int64_t o = 0; o < w.positions[d]; ++o)
      for (int64_t t = 0; t < w.kernel[d]; ++t) {
        const int64_t x = w.coord(d, o, t);
        inside += x >= 0 && x < w.image[d] ? 1 : 0;
      }
    total *= inside;
  }
  return total;
}

WindowAttrs parse_window_attrs(const OpSpec& spec, size_t rank, const std::vector<int64_t>& weight_kernel) {
  const Attributes& at = spec.attrs;
  WindowAttrs w;
  if (at.has("kernel_shape")) {
    w.kernel = at.get_ints("kernel_shape");
    D5_CHECK_ARG(w.kernel.size() == rank, "{}: kernel_shape {} has {} entries for {} spatial axes",
                 spec.label(), w.kernel, w.kernel.size(), rank);
    D5_CHECK_ARG(weight_kernel.empty() || w.kernel == weight_kernel,
                 "{}: kernel_shape {} does not match the weights' spatial shape {}", spec.label(), w.kernel,
                 weight_kernel);
  } else {
    D5_CHECK_ARG(!weight_kernel.empty(), "{}: attribute 'kernel_shape' is required", spec.label());
    w.kernel = weight_kernel;
  }
  w.strides = at.get_ints("strides", std::vector<int64_t>(rank, 1));
  w.dilations = at.get_ints("dilations", std::vector<int64_t>(rank, 1));
  w.pads = at.get_ints("pads", std::vector<int64_t>(2 * rank, 0));
  w.auto_pad = at.get_string("auto_pad", "NOTSET");
  if (w.auto_pad.empty()) w.auto_pad = "NOTSET";  // some exporters write an empty string

  auto positive = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  D5_CHECK_ARG(positive(w.kernel), "{}: kernel_shape {} must be positive", spec.label(), w.kernel);
  D5_CHECK_ARG(w.strides.size() == rank && positive(w.strides), "{}: strides {} must be {} positive values",
               spec.label(), w.strides, rank);
  D5_CHECK_ARG(w.dilations.size() == rank && positive(w.dilations),
               "{}: dilations {} must be {} positive values", spec.label(), w.dilations, rank);
  D5_CHECK_ARG(w.pads.size() == 2 * rank &&
                   std::all_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p >= 0; }),
               "{}: pads {} must be {} non-negative values (all begins, then all ends)", spec.label(), w.pads,
               2 * rank);
  D5_CHECK_ARG(w.auto_pad == "NOTSET" || w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER" ||
                   w.auto_pad == "VALID",
               "{}: auto_pad '{}' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID", spec.label(), w.auto_pad);
  D5_CHECK_ARG(
      w.auto_pad == "NOTSET" || std::all_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p == 0; }),
      "{}: explicit pads {} cannot be combined with auto_pad {}", spec.label(), w.pads, w.auto_pad);
  return w;
}

Window WindowAttrs::window() const {
  const auto half = pads.begin() + static_cast<std::ptrdiff_t>(pads.size() / 2);
  Window w;
  w.kernel = kernel;
  w.strides = strides;
  w.dilations = dilations;
  w.pads_begin.assign(pads.begin(), half);
  w.pads_end.assign(half, pads.end());
  return w;
}

Window sliding_window(const OpSpec& spec, const WindowAttrs& attrs, const std::vector<int64_t>& image,
                      bool ceil_mode) {
  const size_t r = image.size();
  Window w = attrs.window();
  w.image = image;
  w.positions.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t in = image[d], s = w.strides[d];
    if (attrs.same()) {
      // Output in/stride rounded up; the padding that needs is split evenly, the odd one at the
      // end (SAME_UPPER) or at the beginning (SAME_LOWER).
      w.positions[d] = ceil_div(in, s);
      const int64_t total = std::max<int64_t>(0, (w.positions[d] - 1) * s + w.extent(d) - in);
      w.pads_begin[d] = attrs.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[d] = total - w.pads_begin[d];
      continue;
    }
    const int64_t span = in + w.pads_begin[d] + w.pads_end[d] - w.extent(d);
    D5_CHECK_ARG(span >= 0, "{}: spatial axis {} ({} + pads {} + {}) is smaller than the dilated kernel ({})",
                 spec.label(), d, in, w.pads_begin[d], w.pads_end[d], w.extent(d));
    int64_t out = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + w.pads_begin[d]) --out;  // would start in the end padding
    w.positions[d] = out;
  }
  return w;
}

ConvDims conv_dims(const OpSpec& spec, bool transposed) {
  D5_CHECK_ARG(spec.inputs.size() >= 2 && spec.inputs.size() <= 3 && spec.has_input(0) && spec.has_input(1),
               "{}: needs inputs X, W and optionally B, got {} inputs", spec.label(), spec.inputs.size());
  const TensorDesc &x = spec.inputs[0], &w = spec.inputs[1];
  // Which floating types run is each implementation's to say (the reference: f32, f64, and f16 /
  // bf16 widened); the geometry is the same for all.
  D5_CHECK_ARG(is_floating(x.dtype), "{}: dtype {} is not supported (floating point only)", spec.label(),
               to_string(x.dtype));
  ConvDims d{};
  d.bias = spec.has_input(2);
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    D5_CHECK_ARG(!spec.has_input(i) || spec.inputs[i].dtype == x.dtype, "{}: input {} is {} but X is {}",
                 spec.label(), i, to_string(spec.inputs[i].dtype), to_string(x.dtype));
  const size_t r = x.shape.rank();
  D5_CHECK_ARG(r >= 3, "{}: X {} needs N, C and at least one spatial axis", spec.label(),
               x.shape.to_string());
  D5_CHECK_ARG(w.shape.rank() == r, "{}: W {} must have the rank of X {}", spec.label(), w.shape.to_string(),
               x.shape.to_string());
  d.group = spec.attrs.get_int("group", 1);
  d.n = x.shape[0];
  d.c = x.shape[1];
  D5_CHECK_ARG(d.group > 0 && d.c % d.group == 0,
               "{}: group {} must be positive and divide the {} input channels", spec.label(), d.group, d.c);
  if (transposed) {
    D5_CHECK_ARG(w.shape[0] == d.c, "{}: W {} must have C = {} rows", spec.label(), w.shape.to_string(), d.c);
    d.m = w.shape[1] * d.group;
  } else {
    D5_CHECK_ARG(w.shape[1] == d.c / d.group, "{}: W {} must have C / group = {} input channels",
                 spec.label(), w.shape.to_string(), d.c / d.group);
    d.m = w.shape[0];
    D5_CHECK_ARG(d.m % d.group == 0, "{}: group {} must divide the {} output channels", spec.label(), d.group,
                 d.m);
  }
  D5_CHECK_ARG(!d.bias || spec.inputs[2].shape == Shape{d.m}, "{}: B {} must be [{}]", spec.label(),
               d.bias ? spec.inputs[2].shape.to_string() : "", d.m);
  d.image.assign(x.shape.dims().begin() + 2, x.shape.dims().end());
  d.kernel.assign(w.shape.dims().begin() + 2, w.shape.dims().end());
  return d;
}

Window transposed_window(const OpSpec& spec, const ConvDims& d) {
  const size_t r = d.image.size();
  const WindowAttrs a = parse_window_attrs(spec, r, d.kernel);
  const auto out_pad = spec.attrs.get_ints("output_padding", std::vector<int64_t>(r, 0));
  D5_CHECK_ARG(
      out_pad.size() == r && std::all_of(out_pad.begin(), out_pad.end(), [](int64_t p) { return p >= 0; }),
      "{}: output_padding {} must be {} non-negative values", spec.label(), out_pad, r);
  std::vector<int64_t> out_shape = spec.attrs.get_ints("output_shape", {});
  if (out_shape.size() == r + 2)
    out_shape.erase(out_shape.begin(), out_shape.begin() + 2);  // [N, C, ...] form
  D5_CHECK_ARG(out_shape.empty() || out_shape.size() == r, "{}: output_shape {} must have {} spatial extents",
               spec.label(), out_shape, r);

  Window w = a.window();
  w.positions = d.image;
  w.image.resize(r);
  for (size_t i = 0; i < r; ++i) {
    // The output every input pixel's kernel reaches, before any padding is cut off.
    const int64_t full = w.strides[i] * (d.image[i] - 1) + out_pad[i] + w.extent(i);
    if (!out_shape.empty() || a.same()) {
      w.image[i] = !out_shape.empty() ? out_shape[i] : d.image[i] * w.strides[i];
      D5_CHECK_ARG(w.image[i] >= 0, "{}: output_shape {} must be non-negative", spec.label(), out_shape);
      // What is cut off is split evenly; the odd one goes to the end for SAME_UPPER and to the
      // beginning otherwise. A requested output larger than `full` is zero (plus bias) at the end.
      const int64_t total = std::max<int64_t>(0, full - w.image[i]);
      w.pads_begin[i] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
    } else {
      w.image[i] = full - w.pads_begin[i] - w.pads_end[i];
      D5_CHECK_ARG(w.image[i] >= 0, "{}: pads {} remove more than the whole output ({} on axis {})",
                   spec.label(), a.pads, full, i);
    }
  }
  return w;
}

double conv_flops(const ConvDims& d, const Window& w, bool transposed) {
  const double per = transposed ? static_cast<double>(d.c * (d.m / d.group)) : static_cast<double>(d.m * (d.c / d.group));
  return 2.0 * static_cast<double>(d.n) * static_cast<double>(w.position_count()) * per *
         static_cast<double>(w.kernel_size());
}

}  // namespace d5
