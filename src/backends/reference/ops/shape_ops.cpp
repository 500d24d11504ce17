// Operators that change only the shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes
// stay as they are) and the ones that make tensors from shapes or attributes (Shape, Constant,
// ConstantOfShape).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "movement_common.h"

namespace d5::reference {

namespace {

// Row-major data is unchanged by a reshape, so forward and backward are plain copies.
class AliasOp : public MovementOp {
 public:
  AliasOp(const OpSpec& spec, const Shape& out) : MovementOp(spec, {TensorDesc{spec.inputs[0].dtype, out}}) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    copy_bytes(in[0], out[0]);
  }
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    copy_or_zero(gy[0], gx[0]);
  }
};

Shape reshape_target(const OpSpec& spec) {
  const Shape& in = spec.inputs[0].shape;
  const auto target = ints_from_input_or_attr(spec, 1, "shape");
  D5_CHECK_ARG(target.has_value(), "{}: needs the target shape as input 1 (attribute 'shape' before opset 5)",
               spec.label());
  const bool allowzero = spec.attrs.get_int("allowzero", 0) != 0;
  std::vector<int64_t> out(target->size());
  std::optional<size_t> infer;
  bool has_zero = false;
  int64_t known = 1;  // product of the dims other than the -1
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v = (*target)[i];
    if (v == -1) {
      D5_CHECK_ARG(!infer, "{}: shape {} has more than one -1", spec.label(), dims_str(*target));
      infer = i;
      continue;
    }
    if (v == 0 && !allowzero) {
      // With allowzero=0, a 0 copies the input's extent at the same position.
      D5_CHECK_ARG(i < in.rank(), "{}: shape {} has 0 at position {} (copy the input's extent), but the input "
                   "{} has rank {}", spec.label(), dims_str(*target), i, in.to_string(), in.rank());
      v = in[i];
    }
    D5_CHECK_ARG(v >= 0, "{}: shape {} has invalid extent {} (only -1 may be negative)", spec.label(),
                 dims_str(*target), v);
    has_zero = has_zero || v == 0;
    D5_CHECK_ARG(v == 0 || known <= INT64_MAX / v, "{}: shape {} has more elements than fit in int64",
                 spec.label(), dims_str(*target));
    known *= v;
    out[i] = v;
  }
  const int64_t n = in.numel();
  if (infer) {
    D5_CHECK_ARG(!(allowzero && has_zero), "{}: shape {} has both 0 and -1, which allowzero=1 forbids",
                 spec.label(), dims_str(*target));
    D5_CHECK_ARG(known != 0 && n % known == 0, "{}: cannot infer the -1 in shape {} for input {} ({} elements)",
                 spec.label(), dims_str(*target), in.to_string(), n);
    out[*infer] = n / known;
    known = n;
  }
  D5_CHECK_ARG(known == n, "{}: cannot reshape input {} ({} elements) to {} ({} elements)", spec.label(),
               in.to_string(), n, dims_str(out), known);
  return Shape(out);
}

Shape flatten_target(const OpSpec& spec) {
  const Shape& in = spec.inputs[0].shape;
  const auto r = static_cast<int64_t>(in.rank());
  int64_t axis = spec.attrs.get_int("axis", 1);
  D5_CHECK_ARG(axis >= -r && axis <= r, "{}: axis {} is out of range for rank {} (valid: [{}, {}])",
               spec.label(), axis, r, -r, r);
  if (axis < 0) axis += r;
  const auto a = static_cast<size_t>(axis);
  return Shape{product(in.dims(), 0, a), product(in.dims(), a, in.rank())};
}

Shape squeeze_target(const OpSpec& spec) {
  const Shape& in = spec.inputs[0].shape;
  const auto axes = ints_from_input_or_attr(spec, 1, "axes");
  std::vector<bool> drop(in.rank(), false);
  if (!axes) {
    for (size_t i = 0; i < in.rank(); ++i) drop[i] = in[i] == 1;
  } else {
    for (size_t a : normalize_axes(*axes, in.rank(), spec, "axes")) {
      D5_CHECK_ARG(in[a] == 1, "{}: cannot squeeze axis {} of input {}: its extent is {}, not 1", spec.label(),
                   a, in.to_string(), in[a]);
      drop[a] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.rank(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return Shape(out);
}

Shape unsqueeze_target(const OpSpec& spec) {
  const Shape& in = spec.inputs[0].shape;
  const auto axes = ints_from_input_or_attr(spec, 1, "axes");
  D5_CHECK_ARG(axes.has_value(), "{}: needs 'axes' (input 1 from opset 13, an attribute before)", spec.label());
  const size_t rank = in.rank() + axes->size();
  std::vector<bool> inserted(rank, false);
  for (size_t a : normalize_axes(*axes, rank, spec, "axes")) inserted[a] = true;
  std::vector<int64_t> out(rank, 1);
  size_t next = 0;
  for (size_t i = 0; i < rank; ++i)
    if (!inserted[i]) out[i] = in[next++];
  return Shape(out);
}

class ShapeOp : public ReferenceOp {
 public:
  explicit ShapeOp(const OpSpec& spec) : ReferenceOp(spec, {}) {
    const auto r = static_cast<int64_t>(spec.inputs[0].shape.rank());
    // Opset 15: start/end slice the shape; negative values count from the back, then clamp.
    auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
    begin_ = clamp(spec.attrs.get_int("start", 0));
    end_ = std::max(begin_, clamp(spec.attrs.get_int("end", r)));
    outputs_ = {TensorDesc{DType::i64, Shape{end_ - begin_}}};
  }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const auto& dims = spec_.inputs[0].shape.dims();
    std::copy(dims.begin() + begin_, dims.begin() + end_, out[0].data_as<int64_t>());
  }
  std::string no_gradient_reason() const override {
    return "Shape's output depends only on the input's shape, not its values";
  }
  double bytes() const override { return static_cast<double>(outputs_[0].bytes()); }  // reads no data

 private:
  int64_t begin_ = 0, end_ = 0;
};

Tensor constant_value(const OpSpec& spec) {
  const auto& a = spec.attrs;
  const char* names[] = {"value",      "value_float",  "value_floats",  "value_int",
                         "value_ints", "value_string", "value_strings", "sparse_value"};
  std::vector<std::string> given;
  for (const char* n : names)
    if (a.has(n)) given.push_back(n);
  D5_CHECK_ARG(given.size() == 1, "{}: needs exactly one of the value attributes, got {}", spec.label(),
               given.empty() ? std::string("none") : fmt::format("{}", fmt::join(given, ", ")));
  const std::string& n = given[0];
  if (n == "value") {
    Tensor t = a.get_tensor(n);
    D5_CHECK_ARG(t.defined() && t.device().kind == DeviceKind::cpu, "{}: attribute 'value' holds no host data",
                 spec.label());
    return t.reshape(t.shape());  // a shallow copy with layout 'any', like every output
  }
  if (n == "value_float") return Tensor::from_values<float>(Shape{}, {static_cast<float>(a.get_float(n))});
  if (n == "value_int") return Tensor::from_values<int64_t>(Shape{}, {a.get_int(n)});
  if (n == "value_floats") {
    const auto v = a.get_floats(n);
    Tensor t(DType::f32, Shape{static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<float>()[i] = static_cast<float>(v[i]);
    return t;
  }
  if (n == "value_ints") {
    const auto v = a.get_ints(n);
    Tensor t(DType::i64, Shape{static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return t;
  }
  D5_THROW(InvalidArgument, "{}: attribute '{}' is not supported: deep500 tensors hold numbers, not strings",
           spec.label(), n);
}

class ConstantOp : public ReferenceOp {
 public:
  ConstantOp(const OpSpec& spec, Tensor value) : ReferenceOp(spec, {value.desc()}), value_(std::move(value)) {}
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    copy_bytes(value_, out[0]);
  }
  std::string no_gradient_reason() const override { return "Constant has no inputs"; }

 private:
  Tensor value_;
};

// ConstantOfShape: the shape input 0 holds (known at creation), filled with the one element of
// attribute 'value' (a float 0 when absent), whose dtype the output takes. Exporters emit it for
// zero states sized by a dynamic batch (PyTorch's LSTM initial states).
class ConstantOfShapeOp : public ReferenceOp {
 public:
  ConstantOfShapeOp(const OpSpec& spec, Tensor fill, const Shape& shape)
      : ReferenceOp(spec, {TensorDesc{fill.dtype(), shape}}), fill_(std::move(fill)) {}
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const size_t elem = dtype_size(fill_.dtype());
    auto* dst = static_cast<unsigned char*>(out[0].data());
    for (int64_t i = 0; i < out[0].numel(); ++i) std::memcpy(dst + static_cast<size_t>(i) * elem, fill_.data(), elem);
  }
  std::string no_gradient_reason() const override {
    return "ConstantOfShape's input only decides the output's shape";
  }
  double bytes() const override { return static_cast<double>(outputs_[0].bytes()); }

 private:
  Tensor fill_;
};

OpCreateResult make_constant_of_shape(const OpSpec& spec) {
  check_input_count(spec, 1, 1);
  const auto dims = int_values(constant_input(spec, 0, "shape"), spec, "shape");
  for (int64_t d : dims)
    D5_CHECK_ARG(d >= 0, "{}: shape {} has a negative dimension", spec.label(), dims_str(dims));
  Tensor fill = spec.attrs.has("value") ? spec.attrs.get_tensor("value") : Tensor::from_values<float>(Shape{}, {0});
  D5_CHECK_ARG(fill.numel() == 1 && fill.device().kind == DeviceKind::cpu,
               "{}: attribute 'value' must hold one element on the host, holds {}", spec.label(),
               fill.desc().to_string());
  return std::make_unique<ConstantOfShapeOp>(spec, std::move(fill), Shape(dims));
}

template <Shape (*Target)(const OpSpec&)>
OpFactory alias_factory(size_t min_inputs, size_t max_inputs) {
  return [=](const OpSpec& s) -> OpCreateResult {
    check_input_count(s, min_inputs, max_inputs);
    return std::make_unique<AliasOp>(s, Target(s));
  };
}

Shape same_shape(const OpSpec& s) { return s.inputs[0].shape; }

}  // namespace

void register_shape_ops(OpRegistry& r) {
  add_op(r, "Reshape", true, alias_factory<reshape_target>(1, 2));
  add_op(r, "Flatten", true, alias_factory<flatten_target>(1, 1));
  add_op(r, "Squeeze", true, alias_factory<squeeze_target>(1, 2));
  add_op(r, "Unsqueeze", true, alias_factory<unsqueeze_target>(1, 2));
  add_op(r, "Identity", true, alias_factory<same_shape>(1, 1));
  add_op(r, "Shape", false, [](const OpSpec& s) -> OpCreateResult {
    check_input_count(s, 1, 1);
    return std::make_unique<ShapeOp>(s);
  });
  add_op(r, "Constant", false, [](const OpSpec& s) -> OpCreateResult {
    check_input_count(s, 0, 0);
    return std::make_unique<ConstantOp>(s, constant_value(s));
  });
  add_op(r, "ConstantOfShape", false, make_constant_of_shape);
}

}  // namespace d5::reference
