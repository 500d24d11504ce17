// Indexing and selection operators on ATen: GatherElements (at::gather), ScatterElements
// (scatter, scatter_add, scatter_reduce "prod", "amax", "amin"), TopK (a stable sort, so equal
// values keep ONNX's order), Trilu (at::triu / at::tril) and Range (at::arange). Gradients come
// from autograd.
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// ONNX indices (int32/int64, negatives counting back along `axis`) as ATen's int64 ones.
at::Tensor onnx_indices(const at::Tensor& i, int64_t extent) {
  const at::Tensor l = i.to(at::kLong);
  return at::where(l < 0, l + extent, l);
}

Built build_gather_elements(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const int64_t axis = axis_in(s.attrs.get_int("axis", 0), xs.rank());
  const int64_t extent = xs[static_cast<size_t>(axis)];
  return OpDef{single([=](const TensorList& in) { return at::gather(in[0], axis, onnx_indices(in[1], extent)); }),
               "at::gather"};
}

Built build_scatter_elements(const OpSpec& s) {
  const Shape& xs = s.inputs[0].shape;
  const int64_t axis = axis_in(s.attrs.get_int("axis", 0), xs.rank());
  const int64_t extent = xs[static_cast<size_t>(axis)];
  const std::string reduction = s.attrs.get_string("reduction", "none");
  if (reduction == "add")
    return OpDef{single([=](const TensorList& in) { return in[0].scatter_add(axis, onnx_indices(in[1], extent), in[2]); }),
                 "at::scatter_add"};
  if (reduction == "mul" || reduction == "max" || reduction == "min") {
    // include_self: data takes part, as ONNX's y = data, then y[q] = f(y[q], u).
    const std::string aten = reduction == "mul" ? "prod" : reduction == "max" ? "amax" : "amin";
    return OpDef{single([=](const TensorList& in) {
                   return in[0].scatter_reduce(axis, onnx_indices(in[1], extent), in[2], aten, true);
                 }),
                 "at::scatter_reduce"};
  }
  return OpDef{single([=](const TensorList& in) { return in[0].scatter(axis, onnx_indices(in[1], extent), in[2]); }),
               "at::scatter"};
}

Built build_topk(const OpSpec& s, const OpSemantics& ref) {
  const size_t rank = s.inputs[0].shape.rank();
  const int64_t axis = axis_in(s.attrs.get_int("axis", -1), rank);
  const bool largest = s.attrs.get_int("largest", 1) != 0;
  const int64_t k = ref.outputs[0].shape[static_cast<size_t>(axis)];
  Kernel kernel = [=](const Call& c) -> std::vector<at::Tensor> {
    // A stable sort keeps equal values in positional order (ONNX's rule, which at::topk leaves
    // open) and puts NaN first when descending, last when ascending, as the reference does.
    const auto [values, indices] = at::sort(c.in[0], /*stable=*/true, axis, /*descending=*/largest);
    return {values.narrow(axis, 0, k), indices.narrow(axis, 0, k)};
  };
  return OpDef{kernel, "at::sort"};
}

Built build_trilu(const OpSpec& s) {
  const bool upper = s.attrs.get_int("upper", 1) != 0;
  return OpDef{single([upper](const TensorList& in) {
                 const int64_t k = in.size() > 1 && in[1].defined() ? in[1].item<int64_t>() : 0;
                 return upper ? at::triu(in[0], k) : at::tril(in[0], k);
               }),
               "at::triu/at::tril"};
}

Built build_range(const OpSpec& s) {
  const at::ScalarType t = scalar_type(s.inputs[0].dtype);
  return OpDef{single([t](const TensorList& in) {
                 return at::arange(scalar_of(in[0]), scalar_of(in[1]), scalar_of(in[2]), at::TensorOptions().dtype(t));
               }),
               "at::arange"};
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  add_torch_op(
      r, "GatherElements", true, [](const OpSpec& s, const OpSemantics&) { return build_gather_elements(s); },
      "every dtype; int32/int64 indices");
  add_torch_op(
      r, "ScatterElements", true, [](const OpSpec& s, const OpSemantics&) { return build_scatter_elements(s); },
      "reduction none, add, mul, max, min; with none and repeated indices ATen leaves open which update stays");
  add_torch_op(
      r, "TopK", true, [](const OpSpec& s, const OpSemantics& ref) { return build_topk(s, ref); },
      "numeric dtypes; a stable sort (equal values in positional order)");
  add_torch_op(
      r, "Trilu", true, [](const OpSpec& s, const OpSemantics&) { return build_trilu(s); }, "every dtype");
  add_torch_op(
      r, "Range", false, [](const OpSpec& s, const OpSemantics&) { return build_range(s); },
      "f32, f64, i16, i32, i64; the values must be known when the operator is created");
}

}  // namespace d5::torch_backend
