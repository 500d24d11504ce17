// Resize (opset 11+): each output coordinate x of an axis is mapped to a coordinate x_o of the input
// (coordinate_transformation_mode, with scale s = output/input length, L = s * input length, or
// the size asked for, and l the integer output length):
//   half_pixel          (x + 0.5) / s - 0.5
//   half_pixel_symmetric (opset 19) in/2 (1 - l/L) + (x + 0.5) / s - 0.5: half_pixel with the
//                       rounding of L to l split evenly between both ends
//   pytorch_half_pixel  (x + 0.5) / s - 0.5, and -0.5 when L = 1
//   align_corners       x (in - 1) / (L - 1), and 0 when L = 1
//   asymmetric          x / s
//   tf_half_pixel_for_nn (x + 0.5) / s
//   tf_crop_and_resize  roi_start (in - 1) + x (roi_end - roi_start)(in - 1) / (L - 1), and
//                       (roi_end - roi_start)(in - 1) / 2 + roi_start (in - 1) when L = 1; an x_o
//                       outside [0, in - 1] gives extrapolation_value instead of a value
// then interpolated from its neighbours, ONNX's reference formulation: with f = floor(x_o) and
// r = x_o - f in (0, 1] (r = 1 when x_o is an integer, f = x_o - 1),
//   nearest (2 taps f, f+1): by nearest_mode round_prefer_floor [r <= 0.5, r > 0.5],
//           round_prefer_ceil [r < 0.5, r >= 0.5], floor [1, 0], ceil [0, 1]; r = 1 picks f + 1
//   linear  (2 taps f, f+1): [1 - r, r]
//   cubic   (4 taps f-1 .. f+2): Keys' kernel with a = cubic_coeff_a (default -0.75) at distances
//           1 + r, r, 1 - r, 2 - r
// antialias=1 (opset 18; linear and cubic) stretches the kernel by 1/s when downsampling (s < 1),
// as a low-pass filter: taps f+i for i from floor(-w/s) + 1 to -floor(-w/s) (w = 1 linear, 2 cubic),
// weights kernel(s (i - r)) divided by their sum.
// Taps outside [0, in) read the edge element (the input padded by ceil(taps/2) edge copies; a
// window past the padding slides back into it); exclude_outside=1 drops them instead and
// renormalizes the weights. Axes are interpolated one after another (the N-D result is their
// tensor product), in double. Output extents: `sizes` when given, else floor(in * scale). From
// opset 18, `axes` names the axes that roi, scales and sizes describe (the others keep their
// extent), and keep_aspect_ratio_policy not_larger / not_smaller replaces the sizes of those axes
// by one scale for all, the smallest / largest of sizes / in, with extents round(scale * in).
// Gradient (X only): the transpose, each pass's weights scattered back; extrapolated positions
// pass none.
#include <cmath>

#include "movement_common.h"

namespace d5::reference {

namespace {

struct Tap {
  int64_t index;  // in the input axis
  double weight;
};

// Per output coordinate of one axis: its taps, or none (extrapolated) when outside.
struct AxisPlan {
  int64_t in = 0, out = 0;
  std::vector<std::vector<Tap>> taps;
  std::vector<bool> outside;
  bool identity = false;
};

enum class Mode { nearest, linear, cubic };

struct Settings {
  Mode mode = Mode::nearest;
  std::string transform, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

// Keys' cubic kernel at distance t.
double keys(double a, double t) {
  t = std::abs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

// Antialiased weights (linear or cubic): the kernel, of support w, stretched by 1/scale when
// downsampling and normalized, at the taps f + i, i = floor(-w/scale) + 1 .. -floor(-w/scale).
std::vector<double> antialiased(const Settings& s, double r, double scale) {
  scale = std::min(scale, 1.0);
  const double w = s.mode == Mode::cubic ? 2 : 1;
  const auto start = static_cast<int64_t>(std::floor(-w / scale)) + 1;
  std::vector<double> c;
  double sum = 0;
  for (int64_t i = start; i <= 1 - start; ++i) {
    const double t = scale * (static_cast<double>(i) - r);
    c.push_back(s.mode == Mode::cubic ? keys(s.cubic_a, t) : std::clamp(1 - std::abs(t), 0.0, 1.0));
    sum += c.back();
  }
  for (double& v : c) v /= sum;
  return c;
}

// The weights of the taps f - n/2 + 1 .. f + n/2 (n = the count returned) around x_o = f + r.
std::vector<double> coefficients(const Settings& s, double r, double scale, const OpSpec& spec) {
  if (s.antialias && s.mode != Mode::nearest) return antialiased(s, r, scale);
  switch (s.mode) {
    case Mode::linear: return {1 - r, r};
    case Mode::cubic:
      return {keys(s.cubic_a, 1 + r), keys(s.cubic_a, r), keys(s.cubic_a, 1 - r), keys(s.cubic_a, 2 - r)};
    case Mode::nearest: break;
  }
  if (r == 1) return {0, 1};
  const std::string& m = s.nearest_mode;
  if (m == "round_prefer_floor") return {r <= 0.5 ? 1.0 : 0.0, r > 0.5 ? 1.0 : 0.0};
  if (m == "round_prefer_ceil") return {r < 0.5 ? 1.0 : 0.0, r >= 0.5 ? 1.0 : 0.0};
  if (m == "floor") return {1, 0};
  if (m == "ceil") return {0, 1};
  D5_THROW(InvalidArgument, "{}: nearest_mode '{}' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil",
           spec.label(), m);
}

AxisPlan plan_axis(const Settings& s, int64_t in, int64_t out, double scale, double length, double roi_start,
                   double roi_end, const OpSpec& spec) {
  AxisPlan p;
  p.in = in;
  p.out = out;
  p.taps.resize(static_cast<size_t>(out));
  p.outside.assign(static_cast<size_t>(out), false);
  const double last = static_cast<double>(in - 1);
  p.identity = in == out && s.transform != "tf_crop_and_resize" && s.transform != "tf_half_pixel_for_nn";
  for (int64_t x = 0; x < out; ++x) {
    const double xd = static_cast<double>(x);
    double xo = 0;
    const std::string& t = s.transform;
    if (t == "half_pixel") xo = (xd + 0.5) / scale - 0.5;
    else if (t == "half_pixel_symmetric")
      xo = static_cast<double>(in) / 2 * (1 - static_cast<double>(out) / length) + (xd + 0.5) / scale - 0.5;
    else if (t == "pytorch_half_pixel") xo = length == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
    else if (t == "align_corners") xo = length == 1 ? 0 : xd * last / (length - 1);
    else if (t == "asymmetric") xo = xd / scale;
    else if (t == "tf_half_pixel_for_nn") xo = (xd + 0.5) / scale;
    else if (t == "tf_crop_and_resize") {
      xo = (length == 1 ? (roi_end - roi_start) * last / 2 : xd * (roi_end - roi_start) * last / (length - 1)) +
           roi_start * last;
      if (xo < 0 || xo > last) {
        p.outside[static_cast<size_t>(x)] = true;
        continue;
      }
    } else {
      D5_THROW(InvalidArgument,
               "{}: coordinate_transformation_mode '{}' is not one of half_pixel, half_pixel_symmetric, "
               "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize",
               spec.label(), t);
    }
    const double f = std::floor(xo);
    const double r = xo == f ? 1.0 : xo - f;
    std::vector<double> c = coefficients(s, r, scale, spec);
    const auto n = static_cast<int64_t>(c.size()), pad = (n + 1) / 2;
    // The taps' window: f-1..f+2 (cubic) or f..f+1 (wider antialiased), ending at x_o's integer
    // part when r = 1; kept inside the padded range [-pad, in + pad).
    int64_t first = static_cast<int64_t>(xo == f ? f - 1 : f) - (n / 2 - 1);
    first = std::clamp<int64_t>(first, -pad, in + pad - n);
    if (s.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = first + k;
        if (i < 0 || i >= in) c[static_cast<size_t>(k)] = 0;
        sum += c[static_cast<size_t>(k)];
      }
      for (double& w : c) w /= sum;
    }
    auto& taps = p.taps[static_cast<size_t>(x)];
    for (int64_t k = 0; k < n; ++k) {
      const double w = c[static_cast<size_t>(k)];
      if (w == 0) continue;
      const int64_t i = std::clamp<int64_t>(first + k, 0, in - 1);
      auto same = std::find_if(taps.begin(), taps.end(), [i](const Tap& tp) { return tp.index == i; });
      if (same != taps.end()) same->weight += w;
      else taps.push_back({i, w});
    }
    if (taps.size() != 1 || taps[0].index != x || taps[0].weight != 1) p.identity = false;
  }
  return p;
}

class ResizeOp : public MovementOp {
 public:
  ResizeOp(const OpSpec& spec, std::vector<AxisPlan> plans, Shape out_shape, double extrapolation)
      : MovementOp(spec, {TensorDesc{spec.inputs[0].dtype, std::move(out_shape)}}),
        plans_(std::move(plans)),
        extrapolation_(extrapolation) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_all_floats(in[0].dtype(), spec_, [&]<typename T>() {
      const T* x = in[0].data_as<T>();
      std::vector<double> cur(static_cast<size_t>(in[0].numel()));
      for (size_t i = 0; i < cur.size(); ++i) cur[i] = to_double(x[i]);
      std::vector<int64_t> dims = in[0].shape().dims();
      for (size_t d = 0; d < plans_.size(); ++d) cur = pass(cur, dims, d);
      store_doubles(cur, out[0]);
    });
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) return gx[0].fill(0);
    dispatch_all_floats(gy[0].dtype(), spec_, [&]<typename T>() {
      const T* g = gy[0].data_as<T>();
      std::vector<double> cur(static_cast<size_t>(gy[0].numel()));
      for (size_t i = 0; i < cur.size(); ++i) cur[i] = to_double(g[i]);
      // The dims after each forward pass d: the input's with axes < d resized.
      std::vector<int64_t> dims = gy[0].shape().dims();
      for (size_t d = plans_.size(); d-- > 0;) cur = pass_back(cur, dims, d);
      store_doubles(cur, gx[0]);
    });
    (void)in;
  }

  double flops() const override {
    double total = 0, elements = static_cast<double>(spec_.inputs[0].numel());
    for (const auto& p : plans_) {
      if (p.identity) continue;
      elements = elements / static_cast<double>(p.in) * static_cast<double>(p.out);
      double taps = 0;
      for (const auto& t : p.taps) taps += static_cast<double>(t.size());
      total += 2 * elements * taps / static_cast<double>(std::max<int64_t>(1, p.out));
    }
    return total;
  }

 private:
  // Interpolates `cur` (of extents `dims`) along axis d; dims[d] becomes the output length.
  std::vector<double> pass(const std::vector<double>& cur, std::vector<int64_t>& dims, size_t d) const {
    const AxisPlan& p = plans_[d];
    if (p.identity) return cur;
    const int64_t outer = product(dims, 0, d), inner = product(dims, d + 1, dims.size());
    std::vector<double> next(static_cast<size_t>(outer * p.out * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t x = 0; x < p.out; ++x) {
        double* dst = next.data() + (o * p.out + x) * inner;
        if (p.outside[static_cast<size_t>(x)]) {
          std::fill(dst, dst + inner, extrapolation_);
          continue;
        }
        for (const Tap& t : p.taps[static_cast<size_t>(x)]) {
          const double* src = cur.data() + (o * p.in + t.index) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += t.weight * src[i];
        }
      }
    dims[d] = p.out;
    return next;
  }

  // The transpose of pass(): a gradient of extents `dims` (axis d of output length) to axis d's
  // input length.
  std::vector<double> pass_back(const std::vector<double>& grad, std::vector<int64_t>& dims, size_t d) const {
    const AxisPlan& p = plans_[d];
    if (p.identity) return grad;
    const int64_t outer = product(dims, 0, d), inner = product(dims, d + 1, dims.size());
    std::vector<double> prev(static_cast<size_t>(outer * p.in * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t x = 0; x < p.out; ++x) {
        if (p.outside[static_cast<size_t>(x)]) continue;
        const double* src = grad.data() + (o * p.out + x) * inner;
        for (const Tap& t : p.taps[static_cast<size_t>(x)]) {
          double* dst = prev.data() + (o * p.in + t.index) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += t.weight * src[i];
        }
      }
    dims[d] = p.in;
    return prev;
  }

  std::vector<AxisPlan> plans_;
  double extrapolation_;
};

// A float tensor's values (f32 or f64), for roi and scales.
std::vector<double> float_values(const Tensor& t, const OpSpec& spec, std::string_view what) {
  D5_CHECK_ARG(t.dtype() == DType::f32 || t.dtype() == DType::f64, "{}: {} must be float, got {}", spec.label(), what,
               t.desc().to_string());
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<int64_t>(i));
  return v;
}

// An optional input that is present and not an empty tensor (opset 11 passes "" or empty ones).
const Tensor* given(const OpSpec& spec, size_t i, std::string_view what) {
  if (!spec.has_input(i) || spec.inputs[i].numel() == 0) return nullptr;
  return &constant_input(spec, i, what);
}

// The axes roi, scales and sizes describe: `axes` (opset 18), else all.
std::vector<size_t> resized_axes(const OpSpec& spec, size_t rank) {
  std::vector<size_t> axes;
  if (!spec.attrs.has("axes")) {
    for (size_t d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  const std::vector<int64_t> given_axes = spec.attrs.get_ints("axes", {});
  D5_CHECK_ARG(!given_axes.empty(), "{}: axes is empty; name at least one axis, or leave it out for all", spec.label());
  for (int64_t a : given_axes) {
    const size_t d = checked_axis(spec, a, rank, "axes");
    D5_CHECK_ARG(std::find(axes.begin(), axes.end(), d) == axes.end(), "{}: axis {} appears more than once in axes",
                 spec.label(), a);
    axes.push_back(d);
  }
  return axes;
}

// keep_aspect_ratio_policy (opset 18, with sizes): not_larger / not_smaller give the resized axes
// one scale, the smallest / largest of sizes / in, and extents round-half-up(scale * in).
void keep_aspect_ratio(const OpSpec& spec, const Shape& x, const std::vector<size_t>& axes, std::vector<int64_t>& out,
                       std::vector<double>& scale, std::vector<double>& length) {
  const std::string policy = spec.attrs.get_string("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") return;
  D5_CHECK_ARG(policy == "not_larger" || policy == "not_smaller",
               "{}: keep_aspect_ratio_policy '{}' is not one of stretch, not_larger, not_smaller", spec.label(),
               policy);
  double common = scale[axes.front()];
  for (size_t d : axes) common = policy == "not_larger" ? std::min(common, scale[d]) : std::max(common, scale[d]);
  for (size_t d : axes) {
    scale[d] = common;
    length[d] = common * static_cast<double>(x[d]);
    out[d] = static_cast<int64_t>(std::floor(length[d] + 0.5));
    D5_CHECK_ARG(out[d] >= 1, "{}: keep_aspect_ratio_policy '{}' leaves axis {} of length {} empty", spec.label(),
                 policy, d, x[d]);
  }
}

std::unique_ptr<Operator> make_resize(const OpSpec& spec) {
  D5_CHECK_ARG(spec.opset >= 11, "{}: Resize of opset {} (before 11: scales only, other rounding) is not implemented; "
               "export with opset 11 or later", spec.label(), spec.opset);
  check_input_count(spec, 1, 4);
  Settings s;
  const std::string mode = spec.attrs.get_string("mode", "nearest");
  s.mode = mode == "nearest" ? Mode::nearest : mode == "linear" ? Mode::linear : mode == "cubic" ? Mode::cubic
          : throw InvalidArgument(fmt::format("{}: mode '{}' is not one of nearest, linear, cubic", spec.label(), mode));
  s.transform = spec.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  s.nearest_mode = spec.attrs.get_string("nearest_mode", "round_prefer_floor");
  s.cubic_a = spec.attrs.get_float("cubic_coeff_a", -0.75);
  s.exclude_outside = spec.attrs.get_int("exclude_outside", 0) != 0;
  s.extrapolation = spec.attrs.get_float("extrapolation_value", 0.0);
  s.antialias = spec.attrs.get_int("antialias", 0) != 0;
  const Shape& x = spec.inputs[0].shape;
  const size_t rank = x.rank();
  D5_CHECK_ARG(rank >= 1, "{}: X must have rank >= 1", spec.label());
  const std::vector<size_t> axes = resized_axes(spec, rank);
  const Tensor* roi_t = given(spec, 1, "roi");
  const Tensor* scales_t = given(spec, 2, "scales");
  const Tensor* sizes_t = given(spec, 3, "sizes");
  D5_CHECK_ARG((scales_t != nullptr) != (sizes_t != nullptr), "{}: exactly one of scales and sizes must be given",
               spec.label());
  std::vector<double> roi(2 * rank, 0.0);
  for (size_t i = 0; i < rank; ++i) roi[rank + i] = 1;
  if (roi_t) {
    const std::vector<double> given_roi = float_values(*roi_t, spec, "roi");
    D5_CHECK_ARG(given_roi.size() == 2 * axes.size(), "{}: roi must hold 2 x {} = {} values, got {}", spec.label(),
                 axes.size(), 2 * axes.size(), given_roi.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[axes[i]] = given_roi[i];
      roi[rank + axes[i]] = given_roi[axes.size() + i];
    }
  }
  std::vector<int64_t> out = x.dims();
  std::vector<double> scale(rank, 1.0), length(rank);
  for (size_t d = 0; d < rank; ++d) length[d] = static_cast<double>(x[d]);
  if (sizes_t) {
    const std::vector<int64_t> sizes = int_values(*sizes_t, spec, "sizes");
    D5_CHECK_ARG(sizes.size() == axes.size(), "{}: sizes must hold {} values, got {}", spec.label(), axes.size(),
                 sizes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      D5_CHECK_ARG(sizes[i] >= 1, "{}: sizes must be positive, got {}", spec.label(), dims_str(sizes));
      out[axes[i]] = sizes[i];
      scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(x[axes[i]]);
      length[axes[i]] = static_cast<double>(sizes[i]);
    }
    keep_aspect_ratio(spec, x, axes, out, scale, length);
  } else {
    D5_CHECK_ARG(s.transform != "tf_crop_and_resize",
                 "{}: tf_crop_and_resize with scales (whose output extents also depend on the roi) is not implemented; "
                 "give sizes", spec.label());
    const std::vector<double> scales = float_values(*scales_t, spec, "scales");
    D5_CHECK_ARG(scales.size() == axes.size(), "{}: scales must hold {} values, got {}", spec.label(), axes.size(),
                 scales.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t d = axes[i];
      D5_CHECK_ARG(scales[i] > 0, "{}: scales must be positive, got {}", spec.label(), scales[i]);
      scale[d] = scales[i];
      length[d] = scale[d] * static_cast<double>(x[d]);
      out[d] = static_cast<int64_t>(std::floor(length[d]));
      D5_CHECK_ARG(out[d] >= 1, "{}: scale {} leaves axis {} of length {} empty", spec.label(), scale[d], d, x[d]);
    }
  }
  std::vector<AxisPlan> plans;
  for (size_t d = 0; d < rank; ++d)
    plans.push_back(plan_axis(s, x[d], out[d], scale[d], length[d], roi[d], roi[rank + d], spec));
  return std::make_unique<ResizeOp>(spec, std::move(plans), Shape(out), s.extrapolation);
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  add_op(r, "Resize", true, [](const OpSpec& s) -> OpCreateResult { return make_resize(s); });
}

}  // namespace d5::reference
