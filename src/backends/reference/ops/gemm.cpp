// Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, C broadcast to [M, N].
// Transposes are free: the kernel takes strided matrices, so op(A) is A's storage read with its
// strides swapped, and gradients are written through transposed views of their storage.
#include <cmath>

#include "../gemm_kernel.h"
#include "nn_common.h"
#include "widened.h"

namespace d5::reference {

namespace {

class GemmOp : public ReferenceOp {
 public:
  explicit GemmOp(const OpSpec& spec) : ReferenceOp(spec, {output_desc(spec)}) {
    alpha_ = spec.attrs.get_float("alpha", 1.0);
    beta_ = spec.attrs.get_float("beta", 1.0);
    trans_a_ = spec.attrs.get_int("transA", 0) != 0;
    trans_b_ = spec.attrs.get_int("transB", 0) != 0;
    const Shape& a = spec.inputs[0].shape;
    m_ = trans_a_ ? a[1] : a[0];
    k_ = trans_a_ ? a[0] : a[1];
    n_ = outputs_[0].shape[1];
    has_c_ = spec.has_input(2);
    if (!is_floating(spec.inputs[0].dtype))
      D5_CHECK_ARG(alpha_ == std::trunc(alpha_) && beta_ == std::trunc(beta_),
                   "{}: alpha {} and beta {} must be whole numbers for integer inputs", spec.label(), alpha_,
                   beta_);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch<float, double, int32_t, int64_t>(in[0].dtype(), spec_, [&]<typename T>() {
      T* y = out[0].data_as<T>();
      if (has_c_) {
        const T* c = in[2].data_as<T>();
        BroadcastMap(in[2].shape(), out[0].shape()).for_each([&](int64_t o, int64_t i) { y[o] = c[i]; });
      }
      gemm<T>(m_, n_, k_, static_cast<T>(alpha_), op_a<T>(in[0]), op_b<T>(in[1]),
              has_c_ ? static_cast<T>(beta_) : T(0), row_major(y, n_));
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    std::vector<bool> m(spec_.inputs.size(), true);
    if (m.size() > 2) m[2] = has_c_;
    return m;
  }
  std::string no_gradient_reason() const override { return "integer Gemm has no gradient"; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (zero_gradients_if_undefined(gy[0], gx)) return;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T alpha = static_cast<T>(alpha_);
      const auto dy = row_major(gy[0].data_as<T>(), n_);
      // dop(A) = alpha dY op(B)^T (M x K), dop(B) = alpha op(A)^T dY (K x N); a transposed
      // operand's gradient is written through the transposed view of its storage.
      if (gx[0].defined())
        gemm<T>(m_, k_, n_, alpha, dy, op_b<T>(in[1]).t(), T(0), grad_view<T>(gx[0], trans_a_));
      if (gx.size() > 1 && gx[1].defined())
        gemm<T>(k_, n_, m_, alpha, op_a<T>(in[0]).t(), dy, T(0), grad_view<T>(gx[1], trans_b_));
      if (has_c_ && gx.size() > 2 && gx[2].defined()) {
        reduce_to_shape(gy[0], gx[2]);
        T* dc = gx[2].data_as<T>();
        for (int64_t i = 0; i < gx[2].numel(); ++i) dc[i] *= static_cast<T>(beta_);
      }
    });
  }

  double flops() const override { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_ * k_); }

 private:
  static TensorDesc output_desc(const OpSpec& spec) {
    D5_CHECK_ARG(spec.inputs.size() >= 2 && spec.inputs.size() <= 3 && spec.has_input(0) && spec.has_input(1),
                 "{}: needs inputs A, B and optionally C, got {} inputs", spec.label(), spec.inputs.size());
    const TensorDesc &a = spec.inputs[0], &b = spec.inputs[1];
    for (size_t i = 1; i < spec.inputs.size(); ++i)
      D5_CHECK_ARG(!spec.has_input(i) || spec.inputs[i].dtype == a.dtype, "{}: input {} is {} but A is {}",
                   spec.label(), i, to_string(spec.inputs[i].dtype), to_string(a.dtype));
    D5_CHECK_ARG(
        a.dtype == DType::f32 || a.dtype == DType::f64 || a.dtype == DType::i32 || a.dtype == DType::i64,
        "{}: dtype {} is not supported (f32, f64, i32, i64)", spec.label(), to_string(a.dtype));
    D5_CHECK_ARG(a.shape.rank() == 2 && b.shape.rank() == 2, "{}: A {} and B {} must be matrices",
                 spec.label(), a.shape.to_string(), b.shape.to_string());
    const bool ta = spec.attrs.get_int("transA", 0) != 0, tb = spec.attrs.get_int("transB", 0) != 0;
    const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
    const int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
    D5_CHECK_ARG(k == kb,
                 "{}: inner dimensions differ: op(A) is [{}, {}], op(B) is [{}, {}] (transA={}, transB={})",
                 spec.label(), m, k, kb, n, ta, tb);
    if (spec.has_input(2)) {
      // Unidirectional broadcasting: C must broadcast to [M, N] without growing.
      const Shape& c = spec.inputs[2].shape;
      bool ok = c.rank() <= 2;
      for (size_t i = 0; ok && i < c.rank(); ++i) {
        const int64_t target = i + 2 - c.rank() == 0 ? m : n;
        ok = c[i] == target || c[i] == 1;
      }
      D5_CHECK_ARG(ok, "{}: C {} does not broadcast to [{}, {}]", spec.label(), c.to_string(), m, n);
    }
    return {a.dtype, Shape{m, n}};
  }

  template <typename T> MatRef<const T> op_a(const Tensor& a) const {
    const auto v = row_major(a.data_as<T>(), a.shape()[1]);
    return trans_a_ ? v.t() : v;
  }
  template <typename T> MatRef<const T> op_b(const Tensor& b) const {
    const auto v = row_major(b.data_as<T>(), b.shape()[1]);
    return trans_b_ ? v.t() : v;
  }
  template <typename T> static MatRef<T> grad_view(Tensor& g, bool transposed) {
    const auto v = row_major(g.data_as<T>(), g.shape()[1]);
    return transposed ? v.t() : v;
  }

  double alpha_ = 1, beta_ = 1;
  bool trans_a_ = false, trans_b_ = false, has_c_ = false;
  int64_t m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace

void register_gemm_ops(OpRegistry& r) { add_op(r, "Gemm", true, widening(make<GemmOp>)); }

}  // namespace d5::reference
