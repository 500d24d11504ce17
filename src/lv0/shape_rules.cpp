// Broadcasting, axes and per-channel parameters (deep500/spi/shape_rules.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "deep500/core/error.h"
#include "deep500/spi/shape_rules.h"

namespace d5 {

Shape broadcast_shapes(const std::vector<Shape>& shapes, const OpSpec& spec) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.rank());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t off = rank - s.rank();
    for (size_t i = 0; i < s.rank(); ++i) {
      const int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      D5_CHECK_ARG(o == 1, "{}: shapes {} cannot be broadcast together (axis {} is {} vs {})", spec.label(),
                   fmt::join([&] {
                     std::vector<std::string> v;
                     for (const auto& x : shapes) v.push_back(x.to_string());
                     return v;
                   }(), " and "),
                   off + i, o, d);
      o = d;
    }
  }
  return Shape(out);
}

BinaryShapes binary_shapes(const OpSpec& spec, bool same_dtype) {
  D5_CHECK_ARG(spec.inputs.size() == 2 && spec.has_input(0) && spec.has_input(1),
               "{}: needs two inputs, got {}", spec.label(), spec.inputs.size());
  const TensorDesc &a = spec.inputs[0], &b = spec.inputs[1];
  D5_CHECK_ARG(!same_dtype || a.dtype == b.dtype, "{}: inputs must share a dtype, got {} and {}",
               spec.label(), to_string(a.dtype), to_string(b.dtype));
  BinaryShapes s{{a.shape, b.shape}, Shape{}};
  if (spec.opset < 7) {
    // Before opset 7 broadcasting was opt-in (broadcast=1) and B could be aligned at 'axis'.
    if (spec.attrs.get_int("broadcast", 0) == 0) {
      D5_CHECK_ARG(a.shape == b.shape, "{}: opset {} without broadcast=1 needs equal shapes, got {} and {}",
                   spec.label(), spec.opset, a.shape.to_string(), b.shape.to_string());
    } else if (spec.attrs.has("axis")) {
      const int64_t ra = static_cast<int64_t>(a.shape.rank()), rb = static_cast<int64_t>(b.shape.rank());
      int64_t axis = spec.attrs.get_int("axis");
      if (axis < 0) axis += ra;
      D5_CHECK_ARG(axis >= 0 && axis + rb <= ra, "{}: axis={} cannot align B {} inside A {}", spec.label(),
                   spec.attrs.get_int("axis"), b.shape.to_string(), a.shape.to_string());
      std::vector<int64_t> dims = b.shape.dims();
      dims.resize(static_cast<size_t>(ra - axis), 1);
      s.in[1] = Shape(dims);
    }
    D5_CHECK_ARG(broadcast_shapes({s.in[0], s.in[1]}, spec) == a.shape,
                 "{}: legacy broadcasting needs B {} to fit A {}", spec.label(), b.shape.to_string(),
                 a.shape.to_string());
  }
  s.out = broadcast_shapes({s.in[0], s.in[1]}, spec);
  return s;
}

PadMode parse_pad_mode(const OpSpec& spec, const std::string& name) {
  if (name == "constant") return PadMode::constant;
  if (name == "reflect") return PadMode::reflect;
  if (name == "edge") return PadMode::edge;
  if (name == "wrap") return PadMode::wrap;
  D5_THROW(InvalidArgument, "{}: mode '{}' must be constant, reflect, edge or wrap", spec.label(), name);
}

int64_t pad_source(int64_t i, int64_t d, PadMode mode) {
  if (i >= 0 && i < d) return i;
  switch (mode) {
    case PadMode::constant:
      return kPadOutside;
    case PadMode::edge:
      return i < 0 ? 0 : d - 1;
    case PadMode::wrap:
      return (i % d + d) % d;
    case PadMode::reflect: {
      if (d == 1) return 0;
      const int64_t p = 2 * (d - 1);
      const int64_t m = (i % p + p) % p;
      return m < d ? m : p - m;
    }
  }
  return kPadOutside;
}

size_t checked_axis(const OpSpec& spec, int64_t axis, size_t rank, const char* what) {
  const auto r = static_cast<int64_t>(rank);
  D5_CHECK_ARG(axis >= -r && axis < r, "{}: {}={} is out of range for an input of rank {} (valid: [{}, {}])",
               spec.label(), what, axis, r, -r, r - 1);
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

size_t dft_axis(const OpSpec& spec) {
  const auto r = static_cast<int64_t>(spec.inputs[0].shape.rank());
  if (spec.opset < 20) {
    const int64_t axis = spec.attrs.get_int("axis", 1);
    D5_CHECK_ARG(axis >= 1 && axis <= r - 2,
                 "{}: axis {} is not a signal axis of {} (1 to {}: after the batch, before the real/imaginary axis)",
                 spec.label(), axis, spec.inputs[0].shape.to_string(), r - 2);
    return static_cast<size_t>(axis);
  }
  D5_CHECK_ARG(!spec.attrs.has("axis"), "{}: from opset 20 DFT's axis is input 2, not an attribute", spec.label());
  int64_t axis = -2;
  if (spec.has_input(2)) {
    const Tensor* v = spec.value(2);
    D5_CHECK_ARG(v != nullptr && is_integral(v->dtype()) && v->numel() == 1,
                 "{}: input 2 (axis) must be a constant integer scalar known when the operator is created",
                 spec.label());
    axis = static_cast<int64_t>(v->get(0));
  }
  D5_CHECK_ARG((axis >= -r && axis <= -2) || (axis >= 0 && axis <= r - 2),
               "{}: axis {} is not a signal axis of {} ({} to -2 or 0 to {}; the last axis holds real/imaginary)",
               spec.label(), axis, spec.inputs[0].shape.to_string(), -r, r - 2);
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

void check_float_input(const OpSpec& s, size_t i, const char* name) {
  D5_CHECK_ARG(s.has_input(i), "{}: input {} ({}) is required", s.label(), i, name);
  D5_CHECK_ARG(is_floating(s.inputs[i].dtype), "{}: input {} ({}) must be floating point, got {}", s.label(),
               i, name, to_string(s.inputs[i].dtype));
}

void check_param_shape(const OpSpec& s, size_t i, const char* name, const Shape& want) {
  check_float_input(s, i, name);
  D5_CHECK_ARG(s.inputs[i].shape == want, "{}: input {} ({}) has shape {}, expected {}", s.label(), i, name,
               s.inputs[i].shape.to_string(), want.to_string());
}

std::vector<TensorDesc> batch_norm_outputs(const OpSpec& s) {
  D5_CHECK_ARG(s.inputs.size() == 5, "{}: needs 5 inputs (X, scale, B, input_mean, input_var), got {}",
               s.label(), s.inputs.size());
  const Shape& x = s.inputs[0].shape;
  D5_CHECK_ARG(x.rank() >= 2, "{}: X must have rank >= 2 ([N, C, ...]), got {}", s.label(), x.to_string());
  const bool spatial = s.attrs.get_int("spatial", 1) != 0;
  const Shape param =
      spatial ? Shape{x[1]} : Shape(std::vector<int64_t>(x.dims().begin() + 1, x.dims().end()));
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) check_param_shape(s, i, names[i], param);
  std::vector<TensorDesc> outs = {s.inputs[0]};
  if (s.attrs.get_int("training_mode", 0) != 0) {
    outs.push_back(s.inputs[3]);
    outs.push_back(s.inputs[4]);
  }
  return outs;
}

}  // namespace d5
