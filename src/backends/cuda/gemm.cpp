// Gemm and MatMul on cuBLAS, forward and backward, in f32, f16 and bf16. cuBLAS is column-major
// and d5 row-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so every
// product below passes B before A. f32 uses TF32 tensor cores only when asked for
// (set_allow_tf32): with them an f32 product keeps 10 mantissa bits per operand and no longer
// matches the reference's 1e-4 (d5 --math tf32, core/math_mode.h). f16 and bf16 run on tensor
// cores and accumulate in f32, which is what the reference's widened operators compute
// (reference/ops/widened.h), up to the order of the sums.
#include <numeric>

#include "cuda_common.h"
#include "elementwise_kernels.h"

namespace d5::cuda {

void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t sa,
             const float* b, int64_t sb, float beta, float* c, int64_t sc, int64_t batch) {
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  apply_f32_math();
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n), ldc = static_cast<int>(n);
  if (batch == 1) {
    check_cublas(cublasSgemm(cublas_handle(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                             static_cast<int>(k), &alpha, b, ldb, a, lda, &beta, c, ldc),
                 "cublasSgemm");
    return;
  }
  check_cublas(cublasSgemmStridedBatched(cublas_handle(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                         static_cast<int>(k), &alpha, b, ldb, sb, a, lda, sa, &beta, c, ldc, sc,
                                         static_cast<int>(batch)),
               "cublasSgemmStridedBatched");
}

bool tensor_core_dtype(DType t) { return t == DType::f16 || t == DType::bf16; }

void gemm_rm(DType t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t sa,
             const void* b, int64_t sb, float beta, void* c, int64_t sc, int64_t batch) {
  if (t == DType::f32)
    return gemm_rm(ta, tb, m, n, k, alpha, static_cast<const float*>(a), sa, static_cast<const float*>(b), sb, beta,
                   static_cast<float*>(c), sc, batch);
  D5_CHECK(tensor_core_dtype(t), Internal, "gemm_rm: no cuBLAS path for {}", to_string(t));
  const cudaDataType type = t == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n), ldc = static_cast<int>(n);
  check_cublas(cublasGemmStridedBatchedEx(cublas_handle(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                          static_cast<int>(k), &alpha, b, type, ldb, sb, a, type, lda, sa, &beta, c,
                                          type, ldc, sc, static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

std::string cublas_implementation(DType t) {
  if (tensor_core_dtype(t)) return fmt::format("cuda:cublas:gemmEx({}, f32 accumulate)", to_string(t));
  return allow_tf32() ? "cuda:cublas:sgemm(tf32)" : "cuda:cublas:sgemm";
}

void refuse_other_dtypes(const OpSpec& s) {
  const DType t = s.inputs[0].dtype;
  refuse_if(t != DType::f32 && !tensor_core_dtype(t), "{} runs in f32, f16 or bf16; A is {}", s.type, to_string(t));
}

namespace {

void refuse_int_overflow(int64_t v, const char* what) {
  refuse_if(v > std::numeric_limits<int>::max(), "{} = {} is above cuBLAS's 32-bit dimensions", what, v);
}

class GemmOp : public CudaOp {
 public:
  explicit GemmOp(const OpSpec& s) : CudaOp(s) {
    refuse_other_dtypes(s);
    dtype_ = s.inputs[0].dtype;
    alpha_ = static_cast<float>(s.attrs.get_float("alpha", 1.0));
    beta_ = static_cast<float>(s.attrs.get_float("beta", 1.0));
    ta_ = s.attrs.get_int("transA", 0) != 0;
    tb_ = s.attrs.get_int("transB", 0) != 0;
    const Shape& a = s.inputs[0].shape;
    const Shape& b = s.inputs[1].shape;
    m_ = ta_ ? a[1] : a[0];
    k_ = ta_ ? a[0] : a[1];
    n_ = tb_ ? b[0] : b[1];
    for (auto [v, what] : {std::pair{m_, "M"}, {n_, "N"}, {k_, "K"}}) refuse_int_overflow(v, what);
    has_c_ = s.has_input(2) && s.inputs.size() > 2;
    refuse_if(has_c_ && dtype_ != DType::f32, "Gemm with C in {}: adding C runs on an f32-only kernel",
              to_string(dtype_));
    if (has_c_) {
      const Shape& c = s.inputs[2].shape;
      c_dims_ = {1, 1};
      for (size_t i = 0; i < c.rank(); ++i) c_dims_[2 - c.rank() + i] = c[i];
      c_bc_.rank = 2;
      c_bc_.dims[0] = m_;
      c_bc_.dims[1] = n_;
      c_bc_.a_strides[0] = c_dims_[0] == 1 ? 0 : c_dims_[1];
      c_bc_.a_strides[1] = c_dims_[1] == 1 ? 0 : 1;
      if (c_dims_[0] * c_dims_[1] != m_ * n_) c_scratch_ = DeviceBuffer(static_cast<size_t>(m_ * n_) * sizeof(float));
    }
  }

  std::string implementation() const override { return cublas_implementation(dtype_); }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    void* y = out[0].data();
    if (m_ * n_ == 0) return;
    // An empty inner dimension makes the product 0: cuBLAS is not asked to decide that.
    if (k_ == 0 && !(has_c_ && beta_ != 0)) return zero_tensor(out[0]);
    float beta = 0;
    if (has_c_ && beta_ != 0) {  // Y = beta C (broadcast), then the product adds onto it
      kernels::broadcast_scaled(c_bc_, fptr(in[2]), beta_, fptr(out[0]), m_ * n_, op_stream());
      check_launch("broadcast_scaled");
      beta = 1;
    }
    if (k_ > 0) gemm_rm(dtype_, ta_, tb_, m_, n_, k_, alpha_, in[0].data(), 0, in[1].data(), 0, beta, y, 0, 1);
  }

  // dop(A) = alpha dY op(B)^T and dop(B) = alpha op(A)^T dY, written transposed where the input
  // is stored transposed; dC = beta dY summed to C's shape.
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    // No upstream gradient, or no output element to carry one: zeros. (With K = 0, A and B are
    // empty and only C gets a gradient.)
    if (!gy[0].defined() || m_ * n_ == 0) return zero_gradients(gx);
    const void* dy = gy[0].data();
    const void* a = in[0].data();
    const void* b = in[1].data();
    if (gx[0].defined() && k_ > 0) {
      if (!ta_) gemm_rm(dtype_, false, !tb_, m_, k_, n_, alpha_, dy, 0, b, 0, 0, gx[0].data(), 0, 1);
      else gemm_rm(dtype_, tb_, true, k_, m_, n_, alpha_, b, 0, dy, 0, 0, gx[0].data(), 0, 1);
    }
    if (gx.size() > 1 && gx[1].defined() && k_ > 0) {
      if (!tb_) gemm_rm(dtype_, !ta_, false, k_, n_, m_, alpha_, a, 0, dy, 0, 0, gx[1].data(), 0, 1);
      else gemm_rm(dtype_, true, ta_, n_, k_, m_, alpha_, dy, 0, a, 0, 0, gx[1].data(), 0, 1);
    }
    if (has_c_ && gx.size() > 2 && gx[2].defined()) c_gradient(fptr(gy[0]), fptr(gx[2]));
  }

 private:
  void c_gradient(const float* dy, float* dc) {
    kernels::Broadcast identity;
    const int64_t c_n = c_dims_[0] * c_dims_[1];
    identity.rank = 1;
    identity.dims[0] = c_n;
    identity.a_strides[0] = 1;
    if (!c_scratch_.get()) {
      kernels::broadcast_scaled(identity, dy, beta_, dc, c_n, op_stream());
    } else {
      const int64_t full[2] = {m_, n_};
      kernels::sum_to_shape(dy, full, c_scratch_.as<float>(), c_dims_.data(), 2, nullptr);
      check_launch("sum_to_shape");
      kernels::broadcast_scaled(identity, c_scratch_.as<float>(), beta_, dc, c_n, op_stream());
    }
    check_launch("broadcast_scaled");
  }

  DType dtype_ = DType::f32;
  float alpha_ = 1, beta_ = 1;
  bool ta_ = false, tb_ = false, has_c_ = false;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  std::vector<int64_t> c_dims_;
  kernels::Broadcast c_bc_;
  DeviceBuffer c_scratch_;
};

}  // namespace

void register_matmul_op(OpRegistry& r);  // matmul.cpp

void register_gemm_ops(OpRegistry& r) {
  add_op(
      r, "Gemm", [](const OpSpec& s) { return std::make_unique<GemmOp>(s); },
      {.backward = true,
       .any_dtype = true,
       .notes = "f32 on cublasSgemm, TF32 tensor cores only with --math tf32; f16 and bf16 on tensor cores "
                "(cublasGemmEx, f32 accumulation), without C"});
  register_matmul_op(r);
}

}  // namespace d5::cuda
