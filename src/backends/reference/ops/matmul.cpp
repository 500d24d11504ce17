// MatMul with numpy.matmul semantics: the last two axes multiply, the others are batch axes that
// broadcast; a 1-D first operand is a row vector and a 1-D second operand a column vector, and
// the axis they add is dropped from the result.
#include "../gemm_kernel.h"
#include "nn_common.h"
#include "widened.h"

namespace d5::reference {

namespace {

class MatMulOp : public ReferenceOp {
 public:
  explicit MatMulOp(const OpSpec& spec) : ReferenceOp(spec, {TensorDesc{}}) {
    D5_CHECK_ARG(spec.inputs.size() == 2 && spec.has_input(0) && spec.has_input(1),
                 "{}: needs inputs A and B", spec.label());
    const TensorDesc &a = spec.inputs[0], &b = spec.inputs[1];
    D5_CHECK_ARG(a.dtype == b.dtype, "{}: A is {} but B is {}", spec.label(), to_string(a.dtype),
                 to_string(b.dtype));
    D5_CHECK_ARG(
        a.dtype == DType::f32 || a.dtype == DType::f64 || a.dtype == DType::i32 || a.dtype == DType::i64,
        "{}: dtype {} is not supported (f32, f64, i32, i64)", spec.label(), to_string(a.dtype));
    D5_CHECK_ARG(a.shape.rank() >= 1 && b.shape.rank() >= 1, "{}: A {} and B {} must have at least one axis",
                 spec.label(), a.shape.to_string(), b.shape.to_string());
    // Promote 1-D operands to matrices.
    std::vector<int64_t> pa = a.shape.dims(), pb = b.shape.dims();
    if (pa.size() == 1) pa.insert(pa.begin(), 1);
    if (pb.size() == 1) pb.push_back(1);
    m_ = pa[pa.size() - 2];
    k_ = pa.back();
    n_ = pb.back();
    D5_CHECK_ARG(pb[pb.size() - 2] == k_, "{}: A {} and B {} have different inner dimensions ({} vs {})",
                 spec.label(), a.shape.to_string(), b.shape.to_string(), k_, pb[pb.size() - 2]);
    const Shape batch_a(std::vector<int64_t>(pa.begin(), pa.end() - 2));
    const Shape batch_b(std::vector<int64_t>(pb.begin(), pb.end() - 2));
    const Shape batch = broadcast_shapes({batch_a, batch_b}, spec);

    std::vector<int64_t> out = batch.dims();
    if (a.shape.rank() > 1) out.push_back(m_);
    if (b.shape.rank() > 1) out.push_back(n_);
    outputs_[0] = TensorDesc{a.dtype, Shape(out)};

    // Which A and B matrix each output matrix multiplies.
    BroadcastMap(batch_a, batch).for_each([&](int64_t, int64_t i) { index_a_.push_back(i); });
    BroadcastMap(batch_b, batch).for_each([&](int64_t, int64_t i) { index_b_.push_back(i); });
    a_unique_ = batch_a == batch;
    b_unique_ = batch_b == batch;
    // B shared by every batch and A not broadcast: the batch folds into A's rows, one GEMM.
    fold_ = batch_b.numel() == 1 && a_unique_;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch<float, double, int32_t, int64_t>(in[0].dtype(), spec_, [&]<typename T>() {
      const T* a = in[0].data_as<T>();
      const T* b = in[1].data_as<T>();
      T* y = out[0].data_as<T>();
      if (fold_) {
        gemm<T>(batches() * m_, n_, k_, T(1), row_major(a, k_), row_major(b, n_), T(0), row_major(y, n_));
        return;
      }
      for_each_item(batches(), flops() / 2, [&](int64_t i, int) {
        gemm<T>(m_, n_, k_, T(1), row_major(a + index_a_[i] * m_ * k_, k_),
                row_major(b + index_b_[i] * k_ * n_, n_), T(0), row_major(y + i * m_ * n_, n_));
      });
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype)) return {};
    return {true, true};
  }
  std::string no_gradient_reason() const override { return "integer MatMul has no gradient"; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (zero_gradients_if_undefined(gy[0], gx)) return;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* a = in[0].data_as<T>();
      const T* b = in[1].data_as<T>();
      const T* dy = gy[0].data_as<T>();
      T* da = gx[0].defined() ? gx[0].data_as<T>() : nullptr;
      T* db = gx.size() > 1 && gx[1].defined() ? gx[1].data_as<T>() : nullptr;
      if (fold_) {
        const int64_t rows = batches() * m_;
        if (da) gemm<T>(rows, k_, n_, T(1), row_major(dy, n_), row_major(b, n_).t(), T(0), row_major(da, k_));
        if (db) gemm<T>(k_, n_, rows, T(1), row_major(a, k_).t(), row_major(dy, n_), T(0), row_major(db, n_));
        return;
      }
      // dA[i] = dY[i] B[i]^T and dB[i] = A[i]^T dY[i], summed over the batches that broadcast
      // one operand matrix.
      if (da)
        accumulate<T>(a_unique_, index_a_, gx[0], m_ * k_, [&](int64_t i, T beta, T* dst) {
          gemm<T>(m_, k_, n_, T(1), row_major(dy + i * m_ * n_, n_),
                  row_major(b + index_b_[i] * k_ * n_, n_).t(), beta, row_major(dst, k_));
        });
      if (db)
        accumulate<T>(b_unique_, index_b_, gx[1], k_ * n_, [&](int64_t i, T beta, T* dst) {
          gemm<T>(k_, n_, m_, T(1), row_major(a + index_a_[i] * m_ * k_, k_).t(),
                  row_major(dy + i * m_ * n_, n_), beta, row_major(dst, n_));
        });
    });
  }

  double flops() const override {
    return 2.0 * static_cast<double>(batches()) * static_cast<double>(m_ * n_) * static_cast<double>(k_);
  }

 private:
  int64_t batches() const { return static_cast<int64_t>(index_a_.size()); }

  // Runs f(i, beta, target matrix) for every output batch i. When each target is written by one
  // batch only, batches run in parallel and overwrite (beta 0); otherwise they run in order and
  // add into a zeroed target.
  template <typename T, typename F>
  void accumulate(bool unique, const std::vector<int64_t>& index, Tensor& grad_tensor, int64_t size,
                  F&& f) const {
    T* grad = grad_tensor.data_as<T>();
    if (unique) {
      for_each_item(batches(), flops() / 2,
                    [&](int64_t i, int) { f(i, T(0), grad + index[static_cast<size_t>(i)] * size); });
      return;
    }
    std::fill(grad, grad + grad_tensor.numel(), T(0));
    for (int64_t i = 0; i < batches(); ++i) f(i, T(1), grad + index[static_cast<size_t>(i)] * size);
  }

  int64_t m_ = 0, n_ = 0, k_ = 0;
  std::vector<int64_t> index_a_, index_b_;  // per output batch: the A and B batch it reads
  bool a_unique_ = false, b_unique_ = false, fold_ = false;
};

}  // namespace

void register_matmul_ops(OpRegistry& r) { add_op(r, "MatMul", true, widening(make<MatMulOp>)); }

}  // namespace d5::reference
