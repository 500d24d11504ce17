// MatMul and Gemm on oneDNN's matmul primitive. Transposes are free: a transposed operand is its
// plain buffer described with swapped strides. Backward is two more matmuls,
//   dA = dY B^T,  dB = A^T dY,
// and where an operand was broadcast over batch axes, its gradient is computed per batch into a
// buffer of the output's batch shape and summed with a reduction.
#include "deep500/spi/shape_rules.h"
#include "onednn_common.h"

namespace d5::onednn {

namespace {

using dnnl::matmul;

// `dims` with the last two entries replaced by (rows, cols).
memory::dims with_matrix(memory::dims dims, int64_t rows, int64_t cols) {
  dims[dims.size() - 2] = rows;
  dims[dims.size() - 1] = cols;
  return dims;
}

dnnl::primitive_attr scaled(dnnl::primitive_attr a, float scale) {
  if (scale != 1) a.set_output_scales(0, {scale});
  return a;
}

// ---- MatMul -----------------------------------------------------------------------------------
// numpy.matmul: the last two axes multiply, the others are batch axes that broadcast; a 1-D
// first operand is a row vector and a 1-D second operand a column vector, and the axis they add
// is dropped from the result (the buffer is the same either way).
class MatMulOp : public OnednnOp {
 public:
  explicit MatMulOp(const OpSpec& s) : OnednnOp(s, {TensorDesc{}}) {
    D5_CHECK_ARG(s.inputs.size() == 2 && s.has_input(0) && s.has_input(1), "{}: needs inputs A and B",
                 s.label());
    const Shape &a = s.inputs[0].shape, &b = s.inputs[1].shape;
    D5_CHECK_ARG(a.rank() >= 1 && b.rank() >= 1, "{}: A {} and B {} must have at least one axis", s.label(),
                 a.to_string(), b.to_string());
    std::vector<int64_t> pa = a.dims(), pb = b.dims();
    if (pa.size() == 1) pa.insert(pa.begin(), 1);
    if (pb.size() == 1) pb.push_back(1);
    const int64_t m = pa[pa.size() - 2], k = pa.back(), n = pb.back();
    D5_CHECK_ARG(pb[pb.size() - 2] == k, "{}: A {} and B {} have different inner dimensions ({} vs {})",
                 s.label(), a.to_string(), b.to_string(), k, pb[pb.size() - 2]);
    const Shape batch = broadcast_shapes({Shape(std::vector<int64_t>(pa.begin(), pa.end() - 2)),
                                                     Shape(std::vector<int64_t>(pb.begin(), pb.end() - 2))},
                                                    s);
    std::vector<int64_t> out = batch.dims();
    if (a.rank() > 1) out.push_back(m);
    if (b.rank() > 1) out.push_back(n);
    outputs_[0] = TensorDesc{DType::f32, Shape(out)};
    refuse_if(batch.rank() + 2 > DNNL_MAX_NDIMS, "rank {}: oneDNN's matmul takes at most {} axes",
              batch.rank() + 2, DNNL_MAX_NDIMS);
    refuse_if(a.numel() == 0 || b.numel() == 0 || outputs_[0].numel() == 0,
              "empty tensors: nothing for oneDNN to compute");

    const size_t r = batch.rank() + 2;
    memory::dims y_dims(batch.dims().begin(), batch.dims().end());
    y_dims.push_back(m);
    y_dims.push_back(n);
    const auto a_md = plain(padded({pa.begin(), pa.end()}, r)),
               b_md = plain(padded({pb.begin(), pb.end()}, r));
    const auto y_md = plain(y_dims);
    for (auto* x : {&a_, &ga_}) *x = unbound(a_md);
    for (auto* x : {&b_, &gb_}) *x = unbound(b_md);
    for (auto* x : {&y_, &gy_}) *x = unbound(y_md);
    a_t_ = unbound(transposed(a_md));
    b_t_ = unbound(transposed(b_md));
    append<matmul>(forward_, matmul::primitive_desc({a_md, b_md, y_md}, attr(), engine()),
                   {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, y_}}, false);
    // dA = dY B^T and dB = A^T dY over the output's batch shape.
    gradient(grad_a_, gy_, b_t_, ga_, with_matrix(y_dims, m, k), full_a_);
    gradient(grad_b_, a_t_, gy_, gb_, with_matrix(y_dims, k, n), full_b_);
    flops_ = 2.0 * static_cast<double>(batch.numel()) * static_cast<double>(m * n) * static_cast<double>(k);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bind(a_, in[0].data());
    bind(b_, in[1].data());
    bind(y_, out[0].data());
    run(forward_);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, true}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    for (size_t i = 0; i < 2 && i < gx.size(); ++i) {
      if (!gx[i].defined()) continue;
      if (!gy[0].defined()) {
        gx[i].fill(0);
        continue;
      }
      bind(a_t_, in[0].data());
      bind(b_t_, in[1].data());
      bind(gy_, gy[0].data());
      bind(i == 0 ? ga_ : gb_, gx[i].data());
      run(i == 0 ? grad_a_ : grad_b_);
    }
  }

  double flops() const override { return flops_; }

 private:
  // Appends to `steps` grad = lhs x rhs over the batch shape `full_dims`, summed into grad's
  // shape (with a buffer `full` of the batch shape) when grad's operand was broadcast.
  void gradient(Steps& steps, const memory& lhs, const memory& rhs, const memory& grad,
                const memory::dims& full_dims, memory& full) {
    const bool direct = grad.get_desc().dims() == full_dims;
    if (!direct) full = memory(plain(full_dims), engine());
    const memory& dst = direct ? grad : full;
    append<matmul>(steps,
                   matmul::primitive_desc({lhs.get_desc(), rhs.get_desc(), dst.get_desc()}, attr(), engine()),
                   {{DNNL_ARG_SRC, lhs}, {DNNL_ARG_WEIGHTS, rhs}, {DNNL_ARG_DST, dst}}, true);
    if (!direct) append_sum_to(steps, full, grad, 1);
  }

  // a_t_ and b_t_ view A's and B's buffers transposed.
  memory a_, b_, a_t_, b_t_, y_, gy_, ga_, gb_, full_a_, full_b_;
  Steps forward_, grad_a_, grad_b_;
  double flops_ = 0;
};

// ---- Gemm -------------------------------------------------------------------------------------
// Y = alpha op(A) op(B) + beta C with C broadcast to [M, N]. oneDNN 2.6 scales the accumulator
// *and* the bias by the output scale, so:
//   no C (or beta = 0): output scale alpha;
//   C one row [N] or [1, N] and alpha = beta: C as the bias, output scale alpha;
//   otherwise: output scale alpha / beta, then post-ops "+ C" (binary add, broadcast) and "x beta".
class GemmOp : public OnednnOp {
 public:
  explicit GemmOp(const OpSpec& s) : OnednnOp(s, {output_desc(s)}) {
    alpha_ = static_cast<float>(s.attrs.get_float("alpha", 1.0));
    beta_ = static_cast<float>(s.attrs.get_float("beta", 1.0));
    const bool ta = s.attrs.get_int("transA", 0) != 0, tb = s.attrs.get_int("transB", 0) != 0;
    const Shape& a = s.inputs[0].shape;
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], n = outputs_[0].shape[1];
    has_c_ = s.has_input(2);
    refuse_if(a.numel() == 0 || outputs_[0].numel() == 0, "empty tensors: nothing for oneDNN to compute");

    // op(A) [M, K] and op(B) [K, N] over the caller's buffers.
    const auto a_md = ta ? transposed(plain({k, m})) : plain({m, k});
    const auto b_md = tb ? transposed(plain({n, k})) : plain({k, n});
    const auto y_md = plain({m, n});
    a_ = unbound(a_md);
    b_ = unbound(b_md);
    a_t_ = unbound(transposed(a_md));
    b_t_ = unbound(transposed(b_md));
    y_ = unbound(y_md);
    gy_ = unbound(y_md);
    gy_t_ = unbound(transposed(y_md));

    const bool add_c = has_c_ && beta_ != 0;
    Args args = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, y_}};
    if (add_c) {
      const auto c_md = plain(padded(dims_of(s.inputs[2].shape), 2));
      c_ = unbound(c_md);
      gc_ = unbound(c_md);
    }
    if (!add_c) {
      append<matmul>(forward_, matmul::primitive_desc({a_md, b_md, y_md}, scaled(attr(), alpha_), engine()),
                     std::move(args), false);
    } else if (alpha_ == beta_ && c_.get_desc().dims() == memory::dims{1, n}) {
      args.emplace(DNNL_ARG_BIAS, c_);
      append<matmul>(
          forward_,
          matmul::primitive_desc({a_md, b_md, c_.get_desc(), y_md}, scaled(attr(), alpha_), engine()),
          std::move(args), false);
    } else {
      dnnl::post_ops po;
      po.append_binary(dnnl::algorithm::binary_add, c_.get_desc());
      if (beta_ != 1) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, beta_, 0.f);
      dnnl::primitive_attr pa;
      pa.set_post_ops(po);
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, c_);
      append<matmul>(forward_,
                     matmul::primitive_desc({a_md, b_md, y_md}, scaled(attr(pa), alpha_ / beta_), engine()),
                     std::move(args), false);
    }

    // Gradients; a transposed operand's gradient is computed in its storage order:
    //   dop(A) = alpha dY op(B)^T: dA = alpha dY op(B)^T [M, K], or for transA alpha op(B) dY^T [K, M];
    //   dop(B) = alpha op(A)^T dY: dB = alpha op(A)^T dY [K, N], or for transB alpha dY^T op(A) [N, K].
    ga_ = unbound(plain(ta ? memory::dims{k, m} : memory::dims{m, k}));
    gb_ = unbound(plain(tb ? memory::dims{n, k} : memory::dims{k, n}));
    product(grad_a_, ta ? b_ : gy_, ta ? gy_t_ : b_t_, ga_);
    product(grad_b_, tb ? gy_t_ : a_t_, tb ? a_ : gy_, gb_);
    if (has_c_ && beta_ != 0) append_sum_to(grad_c_, gy_, gc_, beta_);
    flops_ = 2.0 * static_cast<double>(m) * static_cast<double>(n * k);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    bind(a_, in[0].data());
    bind(b_, in[1].data());
    if (has_c_ && beta_ != 0) bind(c_, in[2].data());
    bind(y_, out[0].data());
    run(forward_);
  }

  std::vector<bool> differentiable_inputs() const override {
    std::vector<bool> m(spec_.inputs.size(), true);
    if (m.size() > 2) m[2] = has_c_;
    return m;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    for (size_t i = 0; i < 3 && i < gx.size(); ++i) {
      if (!gx[i].defined()) continue;
      if (!gy[0].defined() || (i == 2 && beta_ == 0)) {
        gx[i].fill(0);
        continue;
      }
      for (const auto* m : {&a_, &a_t_}) bind(*m, in[0].data());
      for (const auto* m : {&b_, &b_t_}) bind(*m, in[1].data());
      for (const auto* m : {&gy_, &gy_t_}) bind(*m, gy[0].data());
      const memory* g[] = {&ga_, &gb_, &gc_};
      bind(*g[i], gx[i].data());
      run(i == 0 ? grad_a_ : i == 1 ? grad_b_ : grad_c_);
    }
  }

  double flops() const override { return flops_; }

 private:
  static TensorDesc output_desc(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() >= 2 && s.inputs.size() <= 3 && s.has_input(0) && s.has_input(1),
                 "{}: needs inputs A, B and optionally C, got {} inputs", s.label(), s.inputs.size());
    const Shape &a = s.inputs[0].shape, &b = s.inputs[1].shape;
    D5_CHECK_ARG(a.rank() == 2 && b.rank() == 2, "{}: A {} and B {} must be matrices", s.label(),
                 a.to_string(), b.to_string());
    const bool ta = s.attrs.get_int("transA", 0) != 0, tb = s.attrs.get_int("transB", 0) != 0;
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
    const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    D5_CHECK_ARG(k == kb,
                 "{}: inner dimensions differ: op(A) is [{}, {}], op(B) is [{}, {}] (transA={}, transB={})",
                 s.label(), m, k, kb, n, ta, tb);
    if (s.has_input(2)) {
      // Unidirectional broadcasting: C must broadcast to [M, N] without growing.
      const Shape& c = s.inputs[2].shape;
      bool ok = c.rank() <= 2;
      for (size_t i = 0; ok && i < c.rank(); ++i) {
        const int64_t target = i + 2 - c.rank() == 0 ? m : n;
        ok = c[i] == target || c[i] == 1;
      }
      D5_CHECK_ARG(ok, "{}: C {} does not broadcast to [{}, {}]", s.label(), c.to_string(), m, n);
    }
    return {DType::f32, Shape{m, n}};
  }

  // Appends dst = alpha lhs x rhs to `steps`.
  void product(Steps& steps, const memory& lhs, const memory& rhs, const memory& dst) {
    append<matmul>(steps,
                   matmul::primitive_desc({lhs.get_desc(), rhs.get_desc(), dst.get_desc()},
                                          scaled(attr(), alpha_), engine()),
                   {{DNNL_ARG_SRC, lhs}, {DNNL_ARG_WEIGHTS, rhs}, {DNNL_ARG_DST, dst}}, true);
  }

  float alpha_ = 1, beta_ = 1;
  bool has_c_ = false;
  // *_t_ view the same buffers transposed.
  memory a_, b_, a_t_, b_t_, c_, y_, gy_, gy_t_, ga_, gb_, gc_;
  Steps forward_, grad_a_, grad_b_, grad_c_;
  double flops_ = 0;
};

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  add_op(
      r, "MatMul", true, [](const OpSpec& s) { return std::make_unique<MatMulOp>(s); },
      "matmul primitive with batch broadcasting (backward sums broadcast batches with a reduction); f32 "
      "only; "
      "at most 12 axes");
  add_op(
      r, "Gemm", true, [](const OpSpec& s) { return std::make_unique<GemmOp>(s); },
      "matmul primitive: transposes as strides, alpha as output scale, C as bias (one row, alpha = beta) or "
      "as "
      "a broadcast binary post-op with beta as an eltwise post-op; f32 only");
}

}  // namespace d5::onednn
