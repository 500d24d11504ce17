#include "norm_common.h"

namespace d5::reference {

size_t checked_axis(const OpSpec& spec, int64_t axis, size_t rank, const char* what) {
  const auto r = static_cast<int64_t>(rank);
  D5_CHECK_ARG(axis >= -r && axis < r, "{}: {}={} is out of range for an input of rank {} (valid: [{}, {}])",
               spec.label(), what, axis, r, -r, r - 1);
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

int64_t dims_product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
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

Reduction parse_reduction(const OpSpec& spec) {
  const std::string r = spec.attrs.get_string("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  D5_CHECK_ARG(r == "mean", "{}: reduction='{}' must be 'none', 'sum' or 'mean'", spec.label(), r);
  return Reduction::Mean;
}

}  // namespace d5::reference
