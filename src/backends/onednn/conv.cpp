// Conv and ConvTranspose on oneDNN's convolution and deconvolution primitives (forward, backward
// data, backward weights). The primitives choose their layouts (format_tag::any: blocked
// nChw16c-style activations and blocked weights for the jit/brgemm kernels); ports reorder the
// plain d5 tensors at the boundary. Weights are reordered on every call, since they are inputs
// that training changes between calls.
//
// Weights as oneDNN sees them: with groups, [group, out/group, in/group, kernel...].
//   Conv W [M, C/g, k...] is exactly that in row-major order.
//   ConvTranspose W [C, M/g, k...] is [g, C/g, M/g, k...]: the same dimensions with the two
//   channel axes' strides swapped.
#include <numeric>

#include "window.h"

namespace d5::onednn {

namespace {

using dnnl::prop_kind;

memory::dims nc_dims(int64_t n, int64_t c, const std::vector<int64_t>& spatial) {
  memory::dims d = {n, c};
  d.insert(d.end(), spatial.begin(), spatial.end());
  return d;
}

// Logical oneDNN weight dimensions [(g,) out/g, in/g, k...] over the caller's plain buffer.
memory::desc user_weights(const ConvDims& d, bool transposed) {
  const int64_t taps = std::accumulate(d.kernel.begin(), d.kernel.end(), int64_t{1}, std::multiplies<>());
  const int64_t og = d.m / d.group, ig = d.c / d.group;
  memory::dims dims = {og, ig},
               strides = transposed ? memory::dims{taps, og * taps} : memory::dims{ig * taps, taps};
  if (d.group > 1) {
    dims.insert(dims.begin(), d.group);
    strides.insert(strides.begin(), og * ig * taps);
  }
  dims.insert(dims.end(), d.kernel.begin(), d.kernel.end());
  memory::dims kstrides(d.kernel.size(), 1);
  for (size_t i = d.kernel.size(); i-- > 1;) kstrides[i - 1] = kstrides[i] * d.kernel[i];
  strides.insert(strides.end(), kstrides.begin(), kstrides.end());
  return memory::desc(dims, memory::data_type::f32, strides);
}

// Fwd, BwdData, BwdWeights: dnnl::convolution_* or dnnl::deconvolution_*.
template <typename Fwd, typename BwdData, typename BwdWeights>
class ConvOp : public OnednnOp {
  static constexpr bool kTransposed = std::is_same_v<Fwd, dnnl::deconvolution_forward>;

 public:
  // With `io`, a forward-only variant (NativeLayoutOperator) reading X in io's layout and
  // leaving Y in the primitive's when io keeps it.
  ConvOp(const OpSpec& s, const ConvDims& d, const Window& w, const IoLayouts* io = nullptr)
      : OnednnOp(s, outputs_of(s, d, w)), d_(d), w_(w) {
    refuse_if(w.rank() > 3, "{} spatial axes: oneDNN convolutions have 1 to 3", w.rank());
    // Conv: src X over the window's image, dst Y over its positions; ConvTranspose the other way.
    const auto src = nc_dims(d.n, d.c, kTransposed ? w.positions : w.image);
    const auto dst = nc_dims(d.n, d.m, kTransposed ? w.image : w.positions);
    const auto wmd = user_weights(d, kTransposed);
    const auto bmd = plain({d.m});
    const auto alg = kTransposed ? dnnl::algorithm::deconvolution_direct : dnnl::algorithm::convolution_auto;
    const auto strides = dnnl_strides(w), dil = dnnl_dilations(w), pl = padding_l(w), pr = padding_r(w);
    const auto any_w = any(wmd.dims());
    const prop_kind prop = io ? prop_kind::forward_inference : prop_kind::forward_training;
    auto forward_pd = [&](const memory::desc& src_md) {
      return typename Fwd::primitive_desc(
          d.bias ? typename Fwd::desc(prop, alg, src_md, any_w, bmd, any(dst), strides, dil, pl, pr)
                 : typename Fwd::desc(prop, alg, src_md, any_w, any(dst), strides, dil, pl, pr),
          attr(), engine());
    };
    typename Fwd::primitive_desc fwd = forward_pd(any(src));
    // An input arriving in a layout of oneDNN's: read it as is unless that only has a slower kernel.
    const memory::desc* x_in = io ? io->input(0) : nullptr;
    auto reference_kernel = [](const auto& pd) { return std::string(pd.impl_info_str()).rfind("ref", 0) == 0; };
    if (x_in && fwd.src_desc() != *x_in) {
      try {
        auto as_is = forward_pd(*x_in);
        if (!reference_kernel(as_is) || reference_kernel(fwd)) fwd = as_is;
      } catch (const dnnl::error&) {  // no kernel takes it: the port reorders
      }
    }
    uses(fwd);
    forward_ = make_primitive<Fwd>(fwd);
    using Dir = Port::Dir;
    const bool keep_y = io ? io->keeps(0) : false;
    x_ = port(x_in ? *x_in : plain(src), fwd.src_desc(), Dir::in);
    w_fwd_ = port(wmd, fwd.weights_desc(), Dir::in);
    y_ = port(keep_y ? fwd.dst_desc() : plain(dst), fwd.dst_desc(), Dir::out);
    reorders_ = {x_.reorders(), y_.reorders()};
    if (!io || keep_y) set_output_layout(0, fwd.dst_desc());
    b_ = unbound(bmd);
    forward_args_ = {{DNNL_ARG_SRC, x_.mem()}, {DNNL_ARG_WEIGHTS, w_fwd_.mem()}, {DNNL_ARG_DST, y_.mem()}};
    if (d.bias) forward_args_.emplace(DNNL_ARG_BIAS, b_);
    if (io) return;

    const typename BwdData::primitive_desc bwd_data({alg, any(src), any_w, any(dst), strides, dil, pl, pr},
                                                    attr(), engine(), fwd);
    const typename BwdWeights::primitive_desc bwd_weights(
        d.bias ? typename BwdWeights::desc(alg, any(src), any_w, bmd, any(dst), strides, dil, pl, pr)
               : typename BwdWeights::desc(alg, any(src), any_w, any(dst), strides, dil, pl, pr),
        attr(), engine(), fwd);
    uses(bwd_data, true);
    uses(bwd_weights, true);
    backward_data_ = make_primitive<BwdData>(bwd_data);
    backward_weights_ = make_primitive<BwdWeights>(bwd_weights);
    gy_data_ = port(plain(dst), bwd_data.diff_dst_desc(), Dir::in);
    w_data_ = port(wmd, bwd_data.weights_desc(), Dir::in);
    gx_ = port(plain(src), bwd_data.diff_src_desc(), Dir::out);
    x_weights_ = port(plain(src), bwd_weights.src_desc(), Dir::in);
    gy_weights_ = port(plain(dst), bwd_weights.diff_dst_desc(), Dir::in);
    gw_ = port(wmd, bwd_weights.diff_weights_desc(), Dir::out);
    gb_ = unbound(bmd);
    spare_gb_.allocate(d.m);
    backward_data_args_ = {{DNNL_ARG_DIFF_DST, gy_data_.mem()},
                           {DNNL_ARG_WEIGHTS, w_data_.mem()},
                           {DNNL_ARG_DIFF_SRC, gx_.mem()}};
    backward_weights_args_ = {{DNNL_ARG_SRC, x_weights_.mem()},
                              {DNNL_ARG_DIFF_DST, gy_weights_.mem()},
                              {DNNL_ARG_DIFF_WEIGHTS, gw_.mem()}};
    if (d.bias) backward_weights_args_.emplace(DNNL_ARG_DIFF_BIAS, gb_);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    x_.in(in[0].data());
    w_fwd_.in(in[1].data());
    y_.out(out[0].data());
    if (d_.bias) bind(b_, in[2].data());
    run(forward_, forward_args_);
    y_.finish();
  }

  std::vector<bool> differentiable_inputs() const override { return d_.gradient_mask(spec_.inputs.size()); }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) {  // a zero upstream gradient
      for (auto& g : gx)
        if (g.defined()) g.fill(0);
      return;
    }
    auto wanted = [&](size_t i) { return i < gx.size() && gx[i].defined(); };
    if (wanted(0)) {
      gy_data_.in(gy[0].data());
      w_data_.in(in[1].data());
      gx_.out(gx[0].data());
      run(backward_data_, backward_data_args_);
      gx_.finish();
    }
    if (wanted(1) || (d_.bias && wanted(2))) {
      x_weights_.in(in[0].data());
      gy_weights_.in(gy[0].data());
      gw_.out(wanted(1) ? gx[1].data() : spare_gw_.get(spec_.inputs[1].numel()));
      if (d_.bias) bind(gb_, wanted(2) ? gx[2].data() : spare_gb_.get());
      run(backward_weights_, backward_weights_args_);
      gw_.finish();
    }
  }

  bool takes_layout(size_t i) const override { return i == 0; }
  std::unique_ptr<OnednnOp> variant(const IoLayouts& io) const override {
    return std::make_unique<ConvOp>(spec_, d_, w_, &io);
  }

  double flops() const override { return conv_flops(d_, w_, kTransposed); }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s, const ConvDims& d, const Window& w) {
    const auto& spatial = kTransposed ? w.image : w.positions;
    std::vector<int64_t> y = {d.n, d.m};
    y.insert(y.end(), spatial.begin(), spatial.end());
    refuse_if(Shape(y).numel() == 0 || s.inputs[0].numel() == 0,
              "empty tensors: nothing for oneDNN to compute");
    return {TensorDesc{DType::f32, Shape(y)}};
  }

  ConvDims d_;
  Window w_;
  Fwd forward_;
  BwdData backward_data_;
  BwdWeights backward_weights_;
  // Each primitive may want its own layout of the same tensor, hence a port per use.
  Port x_, w_fwd_, y_, gy_data_, w_data_, gx_, x_weights_, gy_weights_, gw_;
  memory b_, gb_;
  Args forward_args_, backward_data_args_, backward_weights_args_;
  SpareBuffer spare_gw_;
  Buffer spare_gb_;
};

using Conv =
    ConvOp<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>;
using ConvTranspose = ConvOp<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                             dnnl::deconvolution_backward_weights>;

}  // namespace

void register_conv_ops(OpRegistry& r) {
  add_op(
      r, "Conv", true,
      [](const OpSpec& s) -> std::unique_ptr<Operator> {
        const ConvDims d = conv_dims(s, false);
        const Window w = sliding_window(
            s, parse_window_attrs(s, d.image.size(), d.kernel), d.image, false);
        return std::make_unique<Conv>(s, d, w);
      },
      "convolution primitives (convolution_auto: oneDNN picks direct or Winograd), layouts chosen by oneDNN "
      "with reorders at the boundary; f32 only; 1 to 3 spatial axes");
  add_op(
      r, "ConvTranspose", true,
      [](const OpSpec& s) -> std::unique_ptr<Operator> {
        const ConvDims d = conv_dims(s, true);
        return std::make_unique<ConvTranspose>(s, d, transposed_window(s, d));
      },
      "deconvolution primitives, layouts chosen by oneDNN with reorders at the boundary; f32 only; 1 to 3 "
      "spatial axes; refuses output_shape / output_padding that need a right padding below 1 - stride");
}

}  // namespace d5::onednn
