#include "deep500/core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/layout.h"
#include "deep500/core/tensor_desc.h"

namespace d5 {

namespace {
void check_dims(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    D5_CHECK_ARG(dims[i] >= 0, "shape {}: dimension {} is negative ({})",
                 fmt::format("[{}]", fmt::join(dims, ", ")), i, dims[i]);
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) : dims_(dims) { check_dims(dims_); }
Shape::Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) { check_dims(dims_); }

size_t Shape::normalize_axis(int64_t axis) const {
  const auto r = static_cast<int64_t>(rank());
  D5_CHECK_ARG(axis >= -r && axis < r, "axis {} is out of range for shape {} (rank {})", axis,
               to_string(), r);
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

int64_t Shape::dim(int64_t axis) const { return dims_[normalize_axis(axis)]; }

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    D5_CHECK_ARG(d == 0 || n <= INT64_MAX / d, "shape {} has more elements than fit in int64",
                 to_string());
    n *= d;
  }
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims_[i];
  }
  return s;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims_, ", ")); }

std::string_view to_string(Layout l) {
  switch (l) {
    case Layout::any: return "any";
    case Layout::nchw: return "nchw";
    case Layout::nhwc: return "nhwc";
  }
  return "invalid";
}

Layout parse_layout(std::string_view name) {
  if (name == "any") return Layout::any;
  if (name == "nchw" || name == "NCHW") return Layout::nchw;
  if (name == "nhwc" || name == "NHWC") return Layout::nhwc;
  D5_THROW(InvalidArgument, "unknown layout '{}': use any, nchw or nhwc", name);
}

std::string TensorDesc::to_string() const {
  std::string s = fmt::format("{}{}", d5::to_string(dtype), shape.to_string());
  if (layout != Layout::any) s += fmt::format("@{}", d5::to_string(layout));
  return s;
}

d5_tensor_desc TensorDesc::to_c() const {
  D5_CHECK_ARG(shape.rank() <= D5_MAX_RANK,
               "tensor {} has rank {}, above the C ABI limit of {}", to_string(), shape.rank(),
               D5_MAX_RANK);
  d5_tensor_desc c{};
  c.dtype = static_cast<int32_t>(dtype);
  c.layout = static_cast<int32_t>(layout);
  c.rank = static_cast<int32_t>(shape.rank());
  for (size_t i = 0; i < shape.rank(); ++i) c.dims[i] = shape[i];
  return c;
}

TensorDesc TensorDesc::from_c(const d5_tensor_desc& c) {
  D5_CHECK_ARG(c.rank >= 0 && c.rank <= D5_MAX_RANK, "d5_tensor_desc: rank {} outside [0, {}]",
               c.rank, D5_MAX_RANK);
  D5_CHECK_ARG(c.dtype >= D5_DTYPE_F32 && c.dtype <= D5_DTYPE_BOOL,
               "d5_tensor_desc: dtype value {} is not a d5_dtype", c.dtype);
  D5_CHECK_ARG(c.layout >= D5_LAYOUT_ANY && c.layout <= D5_LAYOUT_NHWC,
               "d5_tensor_desc: layout value {} is not a d5_layout", c.layout);
  TensorDesc d;
  d.dtype = static_cast<DType>(c.dtype);
  d.layout = static_cast<Layout>(c.layout);
  d.shape = Shape(std::vector<int64_t>(c.dims, c.dims + c.rank));
  return d;
}

}  // namespace d5
