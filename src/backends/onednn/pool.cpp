// MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool on oneDNN's pooling_v2 primitive
// (the version with dilations), on plain layouts: pooling reads each element about once, so
// reordering to a blocked layout and back would cost more than it saves. An input that arrives in
// a blocked layout (the executor's native layouts) is pooled in it.
//
// ceil_mode is a right padding large enough for the last window (window.h). Max pooling keeps
// oneDNN's workspace (where each maximum came from) from forward to backward. AveragePool with
// count_include_pad uses pooling_avg_include_padding, which divides by the whole kernel; ONNX
// counts only the taps inside the image and its pads, so where ceil_mode extends the padding
// beyond the pads the two differ and the case is refused.

#include "window.h"

namespace d5::onednn {

namespace {

using dnnl::algorithm;

class PoolOp : public SingleInputOp {
 public:
  // With `io`, a forward-only variant (NativeLayoutOperator): an input in a oneDNN layout is
  // pooled in it into the layout oneDNN picks for the output, which stays so when io keeps it.
  PoolOp(const OpSpec& s, const Window& w, algorithm alg, const IoLayouts* io = nullptr)
      : SingleInputOp(s, outputs_of(s, w), plain(dims_of(s.inputs[0].shape)),
                      plain(dims_of(outputs_of(s, w)[0].shape))),
        w_(w),
        alg_(alg) {
    refuse_if(w.rank() < 1 || w.rank() > 3, "{} spatial axes: oneDNN pooling has 1 to 3", w.rank());
    const memory::dims kernel(w.kernel.begin(), w.kernel.end());
    const memory::desc* x_in = io ? io->input(0) : nullptr;
    const auto x_md = x_in ? *x_in : x_.get_desc();
    const auto y_plain = y_.get_desc();
    const auto y_md = x_in ? any(y_plain.dims()) : y_plain;
    const auto strides = dnnl_strides(w), dil = dnnl_dilations(w), pl = padding_l(w), pr = padding_r(w);
    const auto prop = io ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
    const dnnl::pooling_v2_forward::primitive_desc fwd({prop, alg, x_md, y_md, strides, kernel, dil, pl, pr},
                                                       attr(), engine());
    if (x_in) {
      const bool keep = io->keeps(0);
      exchange(x_md, x_md, keep ? fwd.dst_desc() : y_plain, fwd.dst_desc());
      if (keep) set_output_layout(0, fwd.dst_desc());
    }
    Args fwd_args = {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}};
    if (fwd.workspace_desc().get_size()) {  // max pooling: where each maximum came from
      workspace_ = memory(fwd.workspace_desc(), engine());
      fwd_args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    append<dnnl::pooling_v2_forward>(forward_steps_, fwd, std::move(fwd_args), false);
    if (io) return;
    const dnnl::pooling_v2_backward::primitive_desc bwd({alg, x_md, y_md, strides, kernel, dil, pl, pr},
                                                        attr(), engine(), fwd);
    Args bwd_args = {{DNNL_ARG_DIFF_DST, gy_}, {DNNL_ARG_DIFF_SRC, gx_}};
    if (workspace_) bwd_args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    append<dnnl::pooling_v2_backward>(backward_steps_, bwd, std::move(bwd_args), true);
  }

  bool takes_layout(size_t i) const override { return i == 0; }
  std::unique_ptr<OnednnOp> variant(const IoLayouts& io) const override {
    return std::make_unique<PoolOp>(spec_, w_, alg_, &io);
  }

  // Each output reads the taps of its window that lie in the image once (padding is not work).
  double flops() const override {
    const Shape& x = spec_.inputs[0].shape;
    return static_cast<double>(x[0] * x[1]) * static_cast<double>(taps_in_image(w_));
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s, const Window& w) {
    const Shape& x = s.inputs[0].shape;
    std::vector<int64_t> y = {x[0], x[1]};
    y.insert(y.end(), w.positions.begin(), w.positions.end());
    return {TensorDesc{DType::f32, Shape(y)}};
  }

  Window w_;
  algorithm alg_;
  memory workspace_;
};

void check_pool_input(const OpSpec& s, size_t min_rank) {
  D5_CHECK_ARG(s.inputs.size() == 1 && s.has_input(0), "{}: needs exactly one input X, got {}", s.label(),
               s.inputs.size());
  const Shape& x = s.inputs[0].shape;
  D5_CHECK_ARG(x.rank() >= min_rank, "{}: X {} needs N, C and {} spatial axes", s.label(), x.to_string(),
               min_rank > 2 ? "one or more" : "any number of");
  refuse_if(x.numel() == 0, "empty tensor: nothing for oneDNN to compute");
}

// Every window must see at least one image element (ONNX leaves the value of a window entirely
// in the padding undefined; the reference rejects it too).
void check_windows_see_the_image(const OpSpec& s, const Window& w) {
  for (size_t d = 0; d < w.rank(); ++d)
    for (int64_t o = 0; o < w.positions[d]; ++o) {
      bool sees = false;
      for (int64_t t = 0; t < w.kernel[d] && !sees; ++t) {
        const int64_t x = o * w.strides[d] - w.pads_begin[d] + t * w.dilations[d];
        sees = x >= 0 && x < w.image[d];
      }
      D5_CHECK_ARG(sees, "{}: output position {} along spatial axis {} lies entirely in the padding",
                   s.label(), o, d);
    }
}

std::unique_ptr<Operator> make_pool(const OpSpec& s, bool max) {
  check_pool_input(s, 3);
  const Shape& x = s.inputs[0].shape;
  const std::vector<int64_t> image(x.dims().begin() + 2, x.dims().end());
  const Window w = sliding_window(s, parse_window_attrs(s, image.size(), {}), image,
                                             s.attrs.get_int("ceil_mode", 0) != 0);
  check_windows_see_the_image(s, w);
  const int64_t storage_order = s.attrs.get_int("storage_order", 0);
  D5_CHECK_ARG(storage_order == 0 || storage_order == 1, "{}: storage_order {} must be 0 or 1", s.label(),
               storage_order);
  if (max) {
    refuse_if(s.num_outputs != 1,
              "the Indices output{}: oneDNN's max-pooling workspace is in an "
              "implementation-specific format; create the op with num_outputs = 1 for Y alone",
              s.num_outputs < 0 ? " (asked for when the node's output count is unknown)" : "");
    return std::make_unique<PoolOp>(s, w, algorithm::pooling_max);
  }
  const bool include_pad = s.attrs.get_int("count_include_pad", 0) != 0;
  if (include_pad) {
    const auto pr = padding_r(w);
    for (size_t d = 0; d < w.rank(); ++d)
      refuse_if(pr[d] > w.pads_end[d],
                "count_include_pad with ceil_mode extending the padding of axis {} beyond "
                "pads ({} > {}): oneDNN would divide by the whole kernel, ONNX by the taps inside the pads",
                d, pr[d], w.pads_end[d]);
  }
  return std::make_unique<PoolOp>(
      s, w, include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding);
}

std::unique_ptr<Operator> make_global_pool(const OpSpec& s, bool max) {
  check_pool_input(s, 2);
  const Shape& x = s.inputs[0].shape;
  // One window covering the whole image.
  const std::vector<int64_t> image(x.dims().begin() + 2, x.dims().end());
  WindowAttrs a;
  a.kernel = image;
  a.strides.assign(image.size(), 1);
  a.dilations.assign(image.size(), 1);
  a.pads.assign(2 * image.size(), 0);
  a.auto_pad = "NOTSET";
  const Window w = sliding_window(s, a, image, false);
  return std::make_unique<PoolOp>(s, w,
                                  max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding);
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  add_op(
      r, "MaxPool", true, [](const OpSpec& s) { return make_pool(s, true); },
      "pooling_v2 (dilations, ceil_mode as extra right padding); f32 only; 1 to 3 spatial axes; no Indices "
      "output (oneDNN's workspace format is implementation-specific), so num_outputs must be 1");
  add_op(
      r, "AveragePool", true, [](const OpSpec& s) { return make_pool(s, false); },
      "pooling_v2 avg include/exclude padding; f32 only; 1 to 3 spatial axes; refuses count_include_pad when "
      "ceil_mode extends the padding beyond pads");
  add_op(
      r, "GlobalMaxPool", true, [](const OpSpec& s) { return make_global_pool(s, true); },
      "pooling_v2 with the whole image as kernel; f32 only; 1 to 3 spatial axes");
  add_op(
      r, "GlobalAveragePool", true, [](const OpSpec& s) { return make_global_pool(s, false); },
      "pooling_v2 with the whole image as kernel; f32 only; 1 to 3 spatial axes");
}

}  // namespace d5::onednn
