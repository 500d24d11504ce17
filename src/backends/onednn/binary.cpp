// Add, Sub, Mul, Div and two-input Max / Min on oneDNN's binary primitive, with NumPy
// broadcasting: both inputs get leading ones up to the output's rank. oneDNN's jit kernels
// broadcast only the second source, so a commutative op whose first input is the broadcast one
// swaps them; otherwise oneDNN's reference kernel runs (implementation() says so).
//
// Backward has no oneDNN primitive of its own; it is built from binary and reduction primitives.
// Each input's gradient over the whole output shape ("full") is one binary primitive reading the
// output gradient gy (always output-shaped, so always the first source), then a sum reduction
// folds the broadcast axes back to the input's shape:
//   Add: gy, gy   Sub: gy, -gy   Mul: gy * b, gy * a   Div: gy / b, -(y / b) * gy
//   Max/Min: (y == a) * gy, (y != a) * gy: ties go to the first input, as in the reference.
// Sub's negation scales the (small) reduced gradient.
#include "deep500/spi/shape_rules.h"
#include "onednn_common.h"

namespace d5::onednn {

namespace {

using alg = dnnl::algorithm;
enum class Kind { add, sub, mul, div, max, min };

// The forward-only variant (NativeLayoutOperator) of a binary op whose inputs have the output's
// shape and arrive, one or both, in oneDNN layouts: it computes in the first such input's
// layout, reordering the other input where it differs, and leaves the output in it when io keeps it.
class LayoutBinaryOp : public OnednnOp {
 public:
  LayoutBinaryOp(const OpSpec& s, alg a, const std::vector<TensorDesc>& outputs, const IoLayouts& io)
      : OnednnOp(s, outputs) {
    const memory::dims dims = dims_of(outputs[0].shape);
    const memory::desc* native = io.input(0) ? io.input(0) : io.input(1);
    const memory::desc md = native ? *native : plain(dims);
    for (size_t k = 0; k < 2; ++k) {
      in_[k] = port(io.input(k) ? *io.input(k) : plain(dims), md, Port::Dir::in);
      reorders_.inputs += in_[k].reorders();
    }
    y_ = port(io.keeps(0) ? md : plain(dims), md, Port::Dir::out);
    reorders_.outputs = y_.reorders();
    if (io.keeps(0)) set_output_layout(0, md);
    append<dnnl::binary>(steps_, dnnl::binary::primitive_desc({a, md, md, md}, attr(), engine()),
                         {{DNNL_ARG_SRC_0, in_[0].mem()}, {DNNL_ARG_SRC_1, in_[1].mem()}, {DNNL_ARG_DST, y_.mem()}},
                         false);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    in_[0].in(in[0].data());
    in_[1].in(in[1].data());
    y_.out(out[0].data());
    run(steps_);
    y_.finish();
  }

  double flops() const override { return static_cast<double>(outputs_[0].numel()); }

 private:
  Port in_[2], y_;
  Steps steps_;
};

class BinaryOp : public OnednnOp {
 public:
  BinaryOp(const OpSpec& s, Kind kind) : OnednnOp(s, outputs_of(s)), kind_(kind) {
    const size_t rank = std::max<size_t>(1, outputs_[0].shape.rank());
    const memory::dims out = padded(dims_of(outputs_[0].shape), rank);
    for (size_t k = 0; k < 2; ++k) dims_[k] = padded(dims_of(s.inputs[k].shape), rank);
    a_ = unbound(plain(dims_[0]));
    b_ = unbound(plain(dims_[1]));
    y_ = unbound(plain(out));
    gy_ = unbound(plain(out));

    // Forward, swapping the sources when that lets the jit kernel broadcast the second one.
    const bool commutative = kind == Kind::add || kind == Kind::mul || kind == Kind::max || kind == Kind::min;
    const bool swap = commutative && dims_[0] != out && dims_[1] == out;
    const dnnl::binary::primitive_desc fwd(
        {forward_alg(), plain(swap ? dims_[1] : dims_[0]), plain(swap ? dims_[0] : dims_[1]), plain(out)},
        attr(), engine());
    uses(fwd);
    forward_ = make_primitive<dnnl::binary>(fwd);
    forward_args_ = {{DNNL_ARG_SRC_0, swap ? b_ : a_}, {DNNL_ARG_SRC_1, swap ? a_ : b_}, {DNNL_ARG_DST, y_}};

    for (size_t k = 0; k < 2; ++k) gx_[k] = unbound(plain(dims_[k]));
    if (dims_[0] != out || dims_[1] != out) full_ = memory(plain(out), engine());  // before reduction
    for (size_t k = 0; k < 2; ++k) build_gradient(k, out);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bind(a_, in[0].data());
    bind(b_, in[1].data());
    bind(y_, out[0].data());
    run(forward_, forward_args_);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) {
      for (auto& g : gx)
        if (g.defined()) g.fill(0);
      return;
    }
    bind(a_, in[0].data());
    bind(b_, in[1].data());
    bind(y_, out[0].data());
    bind(gy_, gy[0].data());
    for (size_t k = 0; k < 2 && k < gx.size(); ++k) {
      if (!gx[k].defined()) continue;
      bind(gx_[k], gx[k].data());
      run(grads_[k]);
    }
  }

  double flops() const override { return static_cast<double>(outputs_[0].numel()); }

 protected:
  // Without broadcasting: each input has the output's dimensions.
  bool takes_layout(size_t i) const override {
    const memory::dims out = padded(dims_of(outputs_[0].shape), dims_[0].size());
    return i < 2 && dims_[0] == out && dims_[1] == out;
  }
  std::unique_ptr<OnednnOp> variant(const IoLayouts& io) const override {
    return std::make_unique<LayoutBinaryOp>(spec_, forward_alg(), outputs_, io);
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(!s.inputs.empty(), "{}: needs two inputs", s.label());
    refuse_if(s.inputs.size() != 2,
              "{} of {} inputs: the onednn backend implements two inputs (binary primitive)", s.type,
              s.inputs.size());
    refuse_if(s.attrs.get_int("broadcast", 0) != 0,
              "legacy (opset < 7) broadcast with 'broadcast'/'axis' "
              "attributes is not supported");
    const Shape out = broadcast_shapes({s.inputs[0].shape, s.inputs[1].shape}, s);
    refuse_if(out.numel() == 0, "empty tensors: nothing for oneDNN to compute");
    return {TensorDesc{DType::f32, out}};
  }

  alg forward_alg() const {
    switch (kind_) {
      case Kind::add:
        return alg::binary_add;
      case Kind::sub:
        return alg::binary_sub;
      case Kind::mul:
        return alg::binary_mul;
      case Kind::div:
        return alg::binary_div;
      case Kind::max:
        return alg::binary_max;
      case Kind::min:
        return alg::binary_min;
    }
    return alg::binary_add;
  }

  // Input k's gradient: a binary step forming it over the output shape (into gx directly when
  // input k is not broadcast, else into full_), then the sum over the broadcast axes.
  void build_gradient(size_t k, const memory::dims& out) {
    Steps& steps = grads_[k];
    const bool direct = dims_[k] == out;
    const memory& full = direct ? gx_[k] : full_;
    // src0 (output-shaped) op src1 (may broadcast); with `times_gy`, post-ops multiply by gy (and
    // negate, for Div's divisor).
    auto make = [&](alg a, const memory& src0, const memory& src1, bool times_gy, bool negate) {
      dnnl::post_ops po;
      if (times_gy) po.append_binary(alg::binary_mul, gy_.get_desc());
      if (negate) po.append_eltwise(1.f, alg::eltwise_linear, -1.f, 0.f);
      dnnl::primitive_attr pa;
      pa.set_post_ops(po);
      Args args = {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, full}};
      if (times_gy) args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, gy_);
      append<dnnl::binary>(steps,
                           dnnl::binary::primitive_desc(
                               {a, src0.get_desc(), src1.get_desc(), full.get_desc()}, attr(pa), engine()),
                           std::move(args), true);
      if (!direct) append_sum_to(steps, full_, gx_[k], 1);
    };
    switch (kind_) {
      case Kind::add:
        append_sum_to(steps, gy_, gx_[k], 1);
        break;
      case Kind::sub:
        append_sum_to(steps, gy_, gx_[k], k == 0 ? 1 : -1);
        break;
      case Kind::mul:
        make(alg::binary_mul, gy_, k == 0 ? b_ : a_, false, false);
        break;
      case Kind::div:
        if (k == 0)
          make(alg::binary_div, gy_, b_, false, false);
        else
          make(alg::binary_div, y_, b_, true, true);
        break;
      case Kind::max:
      case Kind::min:
        make(k == 0 ? alg::binary_eq : alg::binary_ne, y_, a_, true, false);
        break;
    }
  }

  Kind kind_;
  memory::dims dims_[2];
  memory a_, b_, y_, gy_, gx_[2], full_;
  dnnl::binary forward_;
  Args forward_args_;
  Steps grads_[2];
};

}  // namespace

void register_binary_ops(OpRegistry& r) {
  const std::pair<const char*, Kind> ops[] = {{"Add", Kind::add}, {"Sub", Kind::sub}, {"Mul", Kind::mul},
                                              {"Div", Kind::div}, {"Max", Kind::max}, {"Min", Kind::min}};
  for (const auto& [type, kind] : ops)
    add_op(
        r, type, true, [kind](const OpSpec& s) { return std::make_unique<BinaryOp>(s, kind); },
        std::string(
            "binary primitive with NumPy broadcasting; backward from binary and reduction primitives; "
            "f32 only; two inputs (Max/Min with more are refused); no legacy broadcast attribute") +
            (kind == Kind::max || kind == Kind::min ? "; NaN handling is the CPU's max/min, not NumPy's"
                                                    : ""));
}

}  // namespace d5::onednn
