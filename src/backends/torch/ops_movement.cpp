// Shape and data-movement operators on ATen: Reshape, Flatten, Squeeze, Unsqueeze, Identity (an
// ATen view copied into the output), Transpose, Slice, Pad, Expand, Concat, Split, Gather, and
// Shape and Constant. They move elements of every dtype; gradients come from ATen's autograd
// (index_select's accumulates repeated reads, expand's sums broadcast axes).
#include <algorithm>
#include <numeric>

#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes stay, only the shape changes.
Built build_alias(const OpSemantics& ref) {
  const auto shape = dims_of(ref.outputs[0].shape);
  return OpDef{single([shape](const TensorList& in) { return in[0].reshape(shape); }), "at::reshape"};
}

Built build_transpose(const OpSpec& s) {
  const size_t r = s.inputs[0].shape.rank();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
  perm = s.attrs.get_ints("perm", perm);
  return OpDef{single([perm](const TensorList& in) { return in[0].permute(perm); }), "at::permute"};
}

// One sliced axis: `count` elements from `first` in steps of `step` (ONNX clamping applied).
struct AxisSlice {
  int64_t axis, first, step, count;
  HostConstant index;  // negative steps: the positions as an index tensor (ATen slices only forward)
};

Built build_slice(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const auto starts = *ints_from_input_or_attr(s, 1, "starts");
  const auto ends = *ints_from_input_or_attr(s, 2, "ends");
  const size_t n = starts.size();
  std::vector<int64_t> axes(n), steps(n, 1);
  std::iota(axes.begin(), axes.end(), int64_t{0});
  axes = ints_from_input_or_attr(s, 3, "axes").value_or(axes);
  steps = ints_from_input_or_attr(s, 4, "steps").value_or(steps);
  std::vector<AxisSlice> slices;
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = axis_in(axes[i], xs.rank()), d = xs[static_cast<size_t>(a)];
    const int64_t st = std::clamp(steps[i], -INT64_MAX, INT64_MAX);
    int64_t b = starts[i] < 0 ? starts[i] + d : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
    int64_t count = 0;
    if (st > 0) {
      b = std::clamp(b, int64_t{0}, d);
      e = std::clamp(e, int64_t{0}, d);
      count = e > b ? (e - b - 1) / st + 1 : 0;
    } else if (d > 0) {
      b = std::clamp(b, int64_t{0}, d - 1);
      e = std::clamp(e, int64_t{-1}, d - 1);
      count = b > e ? (b - e - 1) / -st + 1 : 0;
    }
    AxisSlice sl{a, b, st, count, {}};
    if (st < 0) {
      std::vector<int64_t> idx(static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k) idx[static_cast<size_t>(k)] = b + k * st;
      sl.index = HostConstant(at::tensor(idx, at::kLong));
    }
    slices.push_back(std::move(sl));
  }
  return OpDef{single([slices](const TensorList& in) {
                 at::Tensor y = in[0];
                 for (const auto& sl : slices) {
                   if (sl.count == 0)
                     y = y.narrow(sl.axis, 0, 0);
                   else if (sl.step > 0)
                     y = y.slice(sl.axis, sl.first, sl.first + (sl.count - 1) * sl.step + 1, sl.step);
                   else
                     y = y.index_select(sl.axis, sl.index.on(y.device()));
                 }
                 return y;
               }),
               "at::slice"};
}

// The input coordinate that padded coordinate i (shifted by the leading pad) reads: reflect and
// wrap repeat periodically for pads wider than the axis, as numpy.pad does.
int64_t pad_source(int64_t i, int64_t d, const std::string& mode) {
  if (i >= 0 && i < d) return i;
  if (mode == "edge") return i < 0 ? 0 : d - 1;
  if (mode == "wrap") return (i % d + d) % d;
  if (d == 1) return 0;  // reflect
  const int64_t p = 2 * (d - 1), m = (i % p + p) % p;
  return m < d ? m : p - m;
}

// Pad: constant mode with at::constant_pad_nd (negative pads crop); reflect, edge and wrap as one
// index_select per padded axis with the source table, whose backward sums repeated reads.
Built build_pad(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const size_t r = xs.rank();
  const std::string mode = s.attrs.get_string("mode", "constant");
  const auto pads = *ints_from_input_or_attr(s, 1, "pads");
  std::vector<int64_t> all(r);
  std::iota(all.begin(), all.end(), int64_t{0});
  const auto axes = ints_from_input_or_attr(s, 3, "axes").value_or(all);
  std::vector<int64_t> begin(r, 0), end(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axis_in(axes[i], r));
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  if (mode == "constant") {
    std::vector<int64_t> torch_pads;  // last axis first, (begin, end) pairs
    for (size_t a = r; a-- > 0;) {
      torch_pads.push_back(begin[a]);
      torch_pads.push_back(end[a]);
    }
    const double attr_value = s.attrs.get_float("value", 0.0);
    return OpDef{single([torch_pads, attr_value](const TensorList& in) {
                   const at::Scalar v =
                       in.size() > 2 && in[2].defined() ? scalar_of(in[2]) : at::Scalar(attr_value);
                   return at::constant_pad_nd(in[0], torch_pads, v);
                 }),
                 "at::constant_pad_nd"};
  }
  std::vector<std::pair<int64_t, HostConstant>> tables;
  for (size_t a = 0; a < r; ++a) {
    if (begin[a] == 0 && end[a] == 0) continue;
    const int64_t d = xs[a], out = d + begin[a] + end[a];
    std::vector<int64_t> src(static_cast<size_t>(std::max<int64_t>(out, 0)));
    for (int64_t c = 0; c < out; ++c) src[static_cast<size_t>(c)] = pad_source(c - begin[a], d, mode);
    tables.emplace_back(static_cast<int64_t>(a), HostConstant(at::tensor(src, at::kLong)));
  }
  return OpDef{single([tables](const TensorList& in) {
                 at::Tensor y = in[0];
                 for (const auto& [axis, index] : tables) y = y.index_select(axis, index.on(y.device()));
                 return y;
               }),
               "at::index_select"};
}

Built build_expand(const OpSemantics& ref) {
  const auto shape = dims_of(ref.outputs[0].shape);
  return OpDef{single([shape](const TensorList& in) { return in[0].expand(shape); }), "at::expand"};
}

Built build_concat(const OpSpec& s) {
  const int64_t axis = axis_in(s.attrs.get_int("axis"), s.inputs[0].shape.rank());
  return OpDef{pointwise([axis](const TensorList& in) { return at::cat(in, axis); },
                         [axis](at::Tensor& y, const TensorList& in) { return at::cat_out(y, in, axis); }),
               "at::cat"};
}

Built build_split(const OpSpec& s, const OpSemantics& ref) {
  const auto axis = axis_in(s.attrs.get_int("axis", 0), s.inputs[0].shape.rank());
  std::vector<int64_t> sizes;
  for (const auto& d : ref.outputs) sizes.push_back(d.shape[static_cast<size_t>(axis)]);
  return OpDef{[axis, sizes](const Call& c) { return at::split_with_sizes(c.in[0], sizes, axis); },
               "at::split_with_sizes"};
}

// Gather along an axis: index_select with the indices flattened (negative ones counted from the
// end); ATen rejects out-of-range indices.
Built build_gather(const OpSpec& s, const OpSemantics& ref) {
  const Shape& xs = s.inputs[0].shape;
  const int64_t axis = axis_in(s.attrs.get_int("axis", 0), xs.rank());
  const int64_t extent = xs[static_cast<size_t>(axis)];
  const auto out_shape = dims_of(ref.outputs[0].shape);
  std::vector<int64_t> flat = dims_of(xs);
  flat[static_cast<size_t>(axis)] = s.inputs[1].numel();
  auto indices = [extent](const at::Tensor& i) {
    const auto l = i.to(at::kLong).flatten();
    return at::where(l < 0, l + extent, l);
  };
  return OpDef{
      pointwise(
          [=](const TensorList& in) { return at::index_select(in[0], axis, indices(in[1])).view(out_shape); },
          [=](at::Tensor& y, const TensorList& in) {
            at::Tensor yv = y.view(flat);
            at::index_select_out(yv, in[0], axis, indices(in[1]));
            return y;
          }),
      "at::index_select"};
}

// Shape (opset 15 start/end: negative values count from the back, then clamp).
Built build_shape(const OpSpec& s) {
  const auto& dims = s.inputs[0].shape.dims();
  const auto r = static_cast<int64_t>(dims.size());
  auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  const int64_t b = clamp(s.attrs.get_int("start", 0)), e = std::max(b, clamp(s.attrs.get_int("end", r)));
  const auto value = at::tensor(std::vector<int64_t>(dims.begin() + b, dims.begin() + e), at::kLong);
  return OpDef{[value](const Call&) { return TensorList{value}; }, "at::tensor"};
}

// Constant: the attribute's value, made into a tensor once.
Built build_constant(const OpSpec& s, const OpSemantics& ref) {
  const auto& a = s.attrs;
  at::Tensor v;
  if (a.has("value")) {
    v = view_of(a.get_tensor("value")).clone();
  } else if (a.has("value_float")) {
    v = at::tensor(static_cast<float>(a.get_float("value_float")));
  } else if (a.has("value_int")) {
    v = at::tensor(a.get_int("value_int"));
  } else if (a.has("value_floats")) {
    std::vector<float> f;
    for (double x : a.get_floats("value_floats")) f.push_back(static_cast<float>(x));
    v = at::tensor(f);
  } else {
    v = at::tensor(a.get_ints("value_ints"), at::kLong);
  }
  v = v.reshape(dims_of(ref.outputs[0].shape));
  return OpDef{[v](const Call&) { return TensorList{v}; }, "at::tensor"};
}

// The reference decides the output (shape from the input's known values, dtype from `value`);
// the values are filled once, as for Constant.
Built build_constant_of_shape(const OpSpec& s, const OpSemantics& ref) {
  const TensorDesc& out = ref.outputs[0];
  const double fill = s.attrs.has("value") ? s.attrs.get_tensor("value").get(0) : 0.0;
  const at::Tensor v = at::full(dims_of(out.shape), fill, at::TensorOptions().dtype(scalar_type(out.dtype)));
  return OpDef{[v](const Call&) { return TensorList{v}; }, "at::full"};
}

}  // namespace

void register_movement_ops(OpRegistry& r) {
  for (const char* type : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    add_torch_op(
        r, type, true, [](const OpSpec&, const OpSemantics& ref) { return build_alias(ref); }, "every dtype");
  add_torch_op(
      r, "Transpose", true, [](const OpSpec& s, const OpSemantics&) { return build_transpose(s); },
      "every dtype");
  add_torch_op(
      r, "Slice", true, [](const OpSpec& s, const OpSemantics&) { return build_slice(s); },
      "every dtype; negative steps through index_select");
  add_torch_op(
      r, "Pad", true, [](const OpSpec& s, const OpSemantics&) { return build_pad(s); },
      "every dtype; constant, reflect, edge and wrap (wide pads repeat like numpy)");
  add_torch_op(
      r, "Expand", true, [](const OpSpec&, const OpSemantics& ref) { return build_expand(ref); }, "every dtype");
  add_torch_op(
      r, "Concat", true, [](const OpSpec& s, const OpSemantics&) { return build_concat(s); }, "every dtype");
  add_torch_op(
      r, "Split", true, [](const OpSpec& s, const OpSemantics& ref) { return build_split(s, ref); },
      "every dtype");
  add_torch_op(
      r, "Gather", true, [](const OpSpec& s, const OpSemantics& ref) { return build_gather(s, ref); },
      "every dtype; int32/int64 indices");
  add_torch_op(
      r, "Shape", false, [](const OpSpec& s, const OpSemantics&) { return build_shape(s); }, "int64 output");
  add_torch_op(
      r, "Constant", false, [](const OpSpec& s, const OpSemantics& ref) { return build_constant(s, ref); },
      "value, value_float(s), value_int(s)");
  add_torch_op(
      r, "ConstantOfShape", false,
      [](const OpSpec& s, const OpSemantics& ref) { return build_constant_of_shape(s, ref); },
      "the shape input must be known when the operator is created");
}

}  // namespace d5::torch_backend
