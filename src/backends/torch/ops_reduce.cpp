// Reductions (ReduceSum/Mean/Max/L2), ArgMax, the losses (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss, deep500's MSELoss) and Dropout on ATen.

#include <limits>
#include <memory>
#include <numeric>

#include "deep500/core/rng.h"
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

enum class Reduce { sum, mean, max, l2 };

// The maximum over `axes` with the gradient going to the first maximal element (NaN wins), as
// in the reference; at::amax, used by the plain forward, splits the gradient among ties. The
// reduced axes move to the end and are flattened into one, which at::max(dim) reduces.
at::Tensor first_max(const at::Tensor& x, const std::vector<bool>& reduced, at::IntArrayRef out_shape) {
  std::vector<int64_t> perm, kept;
  int64_t group = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (!reduced[d]) {
      perm.push_back(static_cast<int64_t>(d));
      kept.push_back(x.size(static_cast<int64_t>(d)));
    }
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) {
      perm.push_back(static_cast<int64_t>(d));
      group *= x.size(static_cast<int64_t>(d));
    }
  kept.push_back(group);
  return std::get<0>(at::max(x.permute(perm).reshape(kept), -1)).reshape(out_shape);
}

Built build_reduce(const OpSpec& s, const OpSemantics& ref, Reduce kind) {
  const Shape& xs = s.inputs[0].shape;
  const auto given = ints_from_input_or_attr(s, 1, "axes").value_or(std::vector<int64_t>{});
  const bool noop = given.empty() && s.attrs.get_int("noop_with_empty_axes", 0) != 0;
  const bool keep = s.attrs.get_int("keepdims", 1) != 0;
  std::vector<bool> reduced(xs.rank(), given.empty());
  for (int64_t a : given) reduced[static_cast<size_t>(axis_in(a, xs.rank()))] = true;
  std::vector<int64_t> axes;
  for (size_t d = 0; d < xs.rank(); ++d)
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
  const auto out_shape = dims_of(ref.outputs[0].shape);
  const bool floating = is_floating(s.inputs[0].dtype);
  const auto type = scalar_type(s.inputs[0].dtype);
  if (noop) return OpDef{single([](const TensorList& in) { return in[0]; }), "at::alias"};

  switch (kind) {
    case Reduce::sum:
      // dtype keeps integer sums in their own type (ATen would widen them to int64); they wrap.
      return OpDef{pointwise([=](const TensorList& in) { return at::sum(in[0], axes, keep, type); },
                             [=](at::Tensor& y, const TensorList& in) {
                               return at::sum_out(y, in[0], axes, keep, type);
                             }),
                   "at::sum"};
    case Reduce::mean:
      if (!floating)  // ATen's mean is floating-only: average in double, truncate like the reference
        return OpDef{single([=](const TensorList& in) {
                       return at::mean(in[0].to(at::kDouble), axes, keep).to(type);
                     }),
                     "at::mean"};
      return OpDef{
          pointwise([=](const TensorList& in) { return at::mean(in[0], axes, keep); },
                    [=](at::Tensor& y, const TensorList& in) { return at::mean_out(y, in[0], axes, keep); }),
          "at::mean"};
    case Reduce::max:
      for (int64_t a : axes)
        if (xs[static_cast<size_t>(a)] == 0 && Shape(out_shape).numel() > 0)
          return std::string(
              "at::amax cannot reduce an empty axis (ONNX defines the result as the dtype's lowest "
              "value)");
      return OpDef{[=](const Call& c) -> TensorList {
                     if (c.replay || !c.writable(0)) return {first_max(c.in[0], reduced, out_shape)};
                     at::Tensor y = c.out[0];
                     return {at::amax_out(y, c.in[0], axes, keep)};
                   },
                   "at::amax"};
    case Reduce::l2:
      if (!floating)
        return OpDef{single([=](const TensorList& in) {
                       return at::linalg_vector_norm(in[0].to(at::kDouble), 2, axes, keep).to(type);
                     }),
                     "at::linalg_vector_norm"};
      return OpDef{
          pointwise([=](const TensorList& in) { return at::linalg_vector_norm(in[0], 2, axes, keep); },
                    [=](at::Tensor& y, const TensorList& in) {
                      return at::linalg_vector_norm_out(y, in[0], 2, axes, keep);
                    }),
          "at::linalg_vector_norm"};
  }
  return std::string("unknown reduction");
}

// ArgMax and ArgMin; select_last_index=1 takes the last of tied extremes: the first one of the
// flipped axis. NaN counts as the extreme for both, as in the reference.
Built build_arg_extreme(const OpSpec& s, bool max) {
  const Shape& xs = s.inputs[0].shape;
  const int64_t axis = axis_in(s.attrs.get_int("axis", 0), xs.rank());
  const bool keep = s.attrs.get_int("keepdims", 1) != 0;
  const bool last = s.attrs.get_int("select_last_index", 0) != 0;
  const int64_t n = xs.rank() ? xs[static_cast<size_t>(axis)] : 1;
  auto arg = [max, axis, keep](const at::Tensor& x) {
    return max ? at::argmax(x, axis, keep) : at::argmin(x, axis, keep);
  };
  const char* aten = max ? "at::argmax" : "at::argmin";
  if (last)
    return OpDef{single([=](const TensorList& in) { return (n - 1) - arg(at::flip(in[0], {axis})); }), aten};
  return OpDef{pointwise([=](const TensorList& in) { return arg(in[0]); },
                         [=](at::Tensor& y, const TensorList& in) {
                           return max ? at::argmax_out(y, in[0], axis, keep)
                                      : at::argmin_out(y, in[0], axis, keep);
                         }),
               aten};
}

int64_t reduction_of(const OpSpec& s) {
  const std::string r = s.attrs.get_string("reduction", "mean");
  return r == "none" ? at::Reduction::None : r == "sum" ? at::Reduction::Sum : at::Reduction::Mean;
}

// Without ignore_index every target must be a class index: no int64 value is ignored then, and
// ATen reports out-of-range targets (an InvalidArgument here, as on the reference).
int64_t ignore_index_of(const OpSpec& s) {
  return s.attrs.has("ignore_index") ? s.attrs.get_int("ignore_index") : std::numeric_limits<int64_t>::min();
}

Built build_nll(const OpSpec& s) {
  const int64_t red = reduction_of(s), ignore = ignore_index_of(s);
  return OpDef{single([=](const TensorList& in) {
                 const c10::optional<at::Tensor> w =
                     in.size() > 2 && in[2].defined() ? c10::optional<at::Tensor>(in[2]) : c10::nullopt;
                 return at::nll_loss_nd(in[0], in[1].to(at::kLong), w, red, ignore);
               }),
               "at::nll_loss_nd"};
}

// SoftmaxCrossEntropyLoss: NLL of log_softmax over axis 1; outputs the loss and log_prob.
Built build_softmax_cross_entropy(const OpSpec& s) {
  const int64_t red = reduction_of(s), ignore = ignore_index_of(s);
  return OpDef{[=](const Call& c) -> TensorList {
                 at::Tensor logp;
                 if (c.writable(1)) {
                   logp = c.out[1];
                   at::_log_softmax_out(logp, c.in[0], 1, false);
                 } else {
                   logp = at::log_softmax(c.in[0], 1);
                 }
                 const c10::optional<at::Tensor> w =
                     c.in.size() > 2 && c.in[2].defined() ? c10::optional<at::Tensor>(c.in[2]) : c10::nullopt;
                 return {at::nll_loss_nd(logp, c.in[1].to(at::kLong), w, red, ignore), logp};
               },
               "at::nll_loss_nd"};
}

Built build_mse(const OpSpec& s) {
  const int64_t red = reduction_of(s);
  return OpDef{single([red](const TensorList& in) { return at::mse_loss(in[0], in[1], red); }),
               "at::mse_loss"};
}

// Dropout: the mask comes from the reference's stream, RngStream(seed, "Dropout/<node name>")
// (the 'seed' attribute, else a fixed value), drawn on the host, so a seeded run drops the same
// elements as the reference and the cuda backend do: a network with Dropout in training can then
// be validated against the reference, and runs repeat. Each forward draws a fresh mask and keeps
// it; the backward replay reuses it, so the gradient is the upstream gradient through the mask the
// forward applied. A fresh recording forward (a graph executor's training step) draws a new mask,
// as a plain forward does.
struct DropoutState {
  explicit DropoutState(const OpSpec& s)
      : rng(static_cast<uint64_t>(s.attrs.get_int("seed", kDefaultDropoutSeed)), "Dropout/" + s.name) {}
  RngStream rng;
  at::Tensor mask;  // of the last forward; undefined when it dropped nothing
  double scale = 1;
  bool ran = false;
};

Built build_dropout(const OpSpec& s) {
  auto st = std::make_shared<DropoutState>(s);
  const double ratio_attr = s.attrs.get_float("ratio", 0.5);
  const OpSpec spec = s;
  return OpDef{
      [st, ratio_attr, spec](const Call& c) -> TensorList {
        const auto& x = c.in[0];
        if (!c.replay || c.fresh) {
          const double ratio = c.in.size() > 1 && c.in[1].defined() ? c.in[1].item<double>() : ratio_attr;
          D5_CHECK_ARG(ratio >= 0 && ratio <= 1, "{}: ratio {} is outside [0, 1]", spec.label(), ratio);
          const bool training = c.in.size() > 2 && c.in[2].defined() && c.in[2].item<bool>();
          st->mask = at::Tensor();
          st->scale = 1;
          if (training && ratio > 0) {
            // ratio 1 drops everything (as PyTorch does) instead of scaling by infinity.
            st->scale = ratio < 1 ? 1 / (1 - ratio) : 0;
            at::Tensor host = at::empty(x.sizes(), at::TensorOptions().dtype(at::kBool));
            bool* m = host.data_ptr<bool>();
            for (int64_t i = 0; i < host.numel(); ++i) m[i] = st->rng.uniform() >= ratio;
            st->mask = host.to(x.device());
          }
          st->ran = true;
        }
        D5_CHECK_ARG(st->ran, "{}: backward needs a forward call first (it reuses the mask)", spec.label());
        TensorList out;
        if (!st->mask.defined()) {
          out = {x};
          if (c.wanted.size() > 1 || c.out.size() > 1) out.push_back(at::ones(x.sizes(), x.options().dtype(at::kBool)));
          return out;
        }
        out = {at::where(st->mask, x * st->scale, at::zeros({}, x.options()))};
        if (c.wanted.size() > 1 || c.out.size() > 1) out.push_back(st->mask);
        return out;
      },
      "at::where(reference mask)"};
}

}  // namespace

// CumSum: at::cumsum along the axis input, flipped for reverse; exclusive shifts the inclusive
// sum by one (a zero first, the last sum dropped), so no element is subtracted back out.
Built build_cumsum(const OpSpec& s) {
  const bool exclusive = s.attrs.get_int("exclusive", 0) != 0, reverse = s.attrs.get_int("reverse", 0) != 0;
  const size_t rank = s.inputs[0].shape.rank();
  return OpDef{single([exclusive, reverse, rank](const TensorList& in) {
                 const int64_t axis = axis_in(in[1].item<int64_t>(), rank);
                 at::Tensor x = reverse ? in[0].flip({axis}) : in[0];
                 at::Tensor y = x.cumsum(axis);
                 const int64_t n = x.size(axis);
                 if (exclusive && n > 0)
                   y = at::cat({at::zeros_like(y.narrow(axis, 0, 1)), y.narrow(axis, 0, n - 1)}, axis);
                 return reverse ? y.flip({axis}) : y;
               }),
               "at::cumsum"};
}

void register_reduce_ops(OpRegistry& r) {
  const std::pair<const char*, Reduce> reductions[] = {{"ReduceSum", Reduce::sum},
                                                       {"ReduceMean", Reduce::mean},
                                                       {"ReduceMax", Reduce::max},
                                                       {"ReduceL2", Reduce::l2}};
  for (const auto& [type, kind] : reductions)
    add_torch_op(
        r, type, true, [kind](const OpSpec& s, const OpSemantics& ref) { return build_reduce(s, ref, kind); },
        "numeric dtypes (integer Mean/L2 computed in double), and bool for ReduceMax; ReduceMax refuses "
        "empty reduced axes; its gradient goes to the first maximum");
  for (const bool max : {true, false})
    add_torch_op(
        r, max ? "ArgMax" : "ArgMin", false,
        [max](const OpSpec& s, const OpSemantics&) { return build_arg_extreme(s, max); },
        "numeric dtypes; int64 output; no gradient");
  add_torch_op(
      r, "NegativeLogLikelihoodLoss", true, [](const OpSpec& s, const OpSemantics&) { return build_nll(s); },
      "f32, f64; int32/int64 targets");
  add_torch_op(
      r, "SoftmaxCrossEntropyLoss", true,
      [](const OpSpec& s, const OpSemantics&) { return build_softmax_cross_entropy(s); },
      "f32, f64; int32/int64 labels; outputs loss and log_prob");
  add_torch_op(
      r, "MSELoss", true, [](const OpSpec& s, const OpSemantics&) { return build_mse(s); }, "f32, f64");
  add_torch_op(
      r, "CumSum", true, [](const OpSpec& s, const OpSemantics&) { return build_cumsum(s); },
      "f32, f64, i32, i64; exclusive and reverse");
  add_torch_op(
      r, "Dropout", true, [](const OpSpec& s, const OpSemantics&) { return build_dropout(s); },
      "floating dtypes; the mask comes from ATen's generator (seeded), not the reference's stream; "
      "backward reuses the last forward's mask");
}

}  // namespace d5::torch_backend
