// MatMul on cuBLAS with numpy.matmul semantics (1-D operands promoted, batch axes broadcast),
// forward and backward, in f32, f16 and bf16 (gemm.cpp). One strided-batched call covers the usual cases (equal batches, or
// one operand shared by all); other broadcasts run one product per output matrix. A gradient of
// an operand that was broadcast is computed per output matrix and summed back to its shape.
#include "cuda_common.h"
#include "deep500/spi/shape_rules.h"
#include "elementwise_kernels.h"

namespace d5::cuda {

namespace {

// The element offset of each output batch's matrix within an operand of batch shape `mine`.
std::vector<int64_t> matrix_offsets(const Shape& mine, const Shape& batch, int64_t matrix) {
  const size_t r = batch.rank();
  std::vector<int64_t> strides(r, 0);
  int64_t s = matrix;
  for (size_t k = r; k-- > 0;) {
    const int64_t kk = static_cast<int64_t>(k) - static_cast<int64_t>(r - mine.rank());
    const int64_t d = kk >= 0 ? mine[static_cast<size_t>(kk)] : 1;
    strides[k] = d == 1 ? 0 : s;
    s *= d;
  }
  std::vector<int64_t> offsets(static_cast<size_t>(batch.numel()));
  for (int64_t i = 0; i < batch.numel(); ++i) {
    int64_t rest = i, off = 0;
    for (size_t k = r; k-- > 0;) {
      off += (rest % batch[k]) * strides[k];
      rest /= batch[k];
    }
    offsets[static_cast<size_t>(i)] = off;
  }
  return offsets;
}

// The common stride when offsets[i] = i * stride for every i, else -1.
int64_t uniform_stride(const std::vector<int64_t>& offsets) {
  if (offsets.size() < 2) return 0;
  const int64_t s = offsets[1] - offsets[0];
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != static_cast<int64_t>(i) * s) return -1;
  return s;
}

class MatMulOp : public CudaOp {
 public:
  explicit MatMulOp(const OpSpec& s) : CudaOp(s) {
    refuse_other_dtypes(s);
    dtype_ = s.inputs[0].dtype;
    std::vector<int64_t> pa = s.inputs[0].shape.dims(), pb = s.inputs[1].shape.dims();
    if (pa.size() == 1) pa.insert(pa.begin(), 1);
    if (pb.size() == 1) pb.push_back(1);
    m_ = pa[pa.size() - 2];
    k_ = pa.back();
    n_ = pb.back();
    refuse_if(std::max({m_, n_, k_}) > std::numeric_limits<int>::max(), "a dimension is above cuBLAS's 32 bits");
    batch_a_ = Shape(std::vector<int64_t>(pa.begin(), pa.end() - 2));
    batch_b_ = Shape(std::vector<int64_t>(pb.begin(), pb.end() - 2));
    batch_ = broadcast_shapes({batch_a_, batch_b_}, s);
    off_a_ = matrix_offsets(batch_a_, batch_, m_ * k_);
    off_b_ = matrix_offsets(batch_b_, batch_, k_ * n_);
    stride_a_ = uniform_stride(off_a_);
    stride_b_ = uniform_stride(off_b_);
    const int64_t nb = batch_.numel();
    if (dtype_ != DType::f32 && (batch_a_.numel() != nb || batch_b_.numel() != nb)) {
      forward_only(fmt::format("MatMul in {} with an operand broadcast over the batch: summing its gradient back "
                               "runs on an f32-only kernel",
                               to_string(dtype_)));
      return;
    }
    // Operands broadcast over the batch get their per-matrix gradients in scratch first.
    if (batch_a_.numel() != nb) scratch_a_ = DeviceBuffer(static_cast<size_t>(nb * m_ * k_) * sizeof(float));
    if (batch_b_.numel() != nb) scratch_b_ = DeviceBuffer(static_cast<size_t>(nb * k_ * n_) * sizeof(float));
  }

  std::string implementation() const override { return cublas_implementation(dtype_); }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (k_ == 0) return zero_tensor(out[0]);  // sums of no terms
    // C_i = A_i B_i
    products(false, false, m_, n_, k_, in[0].data(), off_a_, stride_a_, in[1].data(), off_b_, stride_b_, out[0].data());
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    // No upstream gradient, or an empty product (every sum has no term): zeros.
    if (!gy[0].defined() || batch_.numel() * m_ * n_ * k_ == 0) return zero_gradients(gx);
    const std::vector<int64_t> own = out_offsets();
    if (gx[0].defined()) {  // dA_i = dY_i B_i^T
      void* dst = scratch_a_.get() ? scratch_a_.get() : gx[0].data();
      products(false, true, m_, k_, n_, gy[0].data(), own, m_ * n_, in[1].data(), off_b_, stride_b_, dst);
      if (scratch_a_.get()) sum_back(scratch_a_.as<float>(), batch_a_, m_, k_, fptr(gx[0]));
    }
    if (gx.size() > 1 && gx[1].defined()) {  // dB_i = A_i^T dY_i
      void* dst = scratch_b_.get() ? scratch_b_.get() : gx[1].data();
      products(true, false, k_, n_, m_, in[0].data(), off_a_, stride_a_, gy[0].data(), own, m_ * n_, dst);
      if (scratch_b_.get()) sum_back(scratch_b_.as<float>(), batch_b_, k_, n_, fptr(gx[1]));
    }
  }

 private:
  std::vector<int64_t> out_offsets() const {
    std::vector<int64_t> o(static_cast<size_t>(batch_.numel()));
    for (size_t i = 0; i < o.size(); ++i) o[i] = static_cast<int64_t>(i) * m_ * n_;
    return o;
  }

  // C_i (m x n, dense, batch-major) = op(X_i) op(Y_i) for every output batch i; offsets in elements.
  void products(bool tx, bool ty, int64_t m, int64_t n, int64_t k, const void* x, const std::vector<int64_t>& ox,
                int64_t sx, const void* y, const std::vector<int64_t>& oy, int64_t sy, void* c) const {
    const int64_t nb = batch_.numel();
    if (nb == 0 || m * n == 0) return;
    if (sx >= 0 && sy >= 0) {
      gemm_rm(dtype_, tx, ty, m, n, k, 1.0f, x, sx, y, sy, 0.0f, c, m * n, nb);
      return;
    }
    const auto e = static_cast<int64_t>(dtype_size(dtype_));
    const char *xb = static_cast<const char*>(x), *yb = static_cast<const char*>(y);
    char* cb = static_cast<char*>(c);
    for (int64_t i = 0; i < nb; ++i)
      gemm_rm(dtype_, tx, ty, m, n, k, 1.0f, xb + ox[static_cast<size_t>(i)] * e, 0, yb + oy[static_cast<size_t>(i)] * e,
              0, 0.0f, cb + i * m * n * e, 0, 1);
  }

  // Sums per-output-batch matrices (rows x cols each) back to an operand of batch shape `mine`.
  void sum_back(const float* full, const Shape& mine, int64_t rows, int64_t cols, float* dst) const {
    const size_t r = batch_.rank() + 2;
    std::vector<int64_t> src_dims = batch_.dims(), dst_dims(r, 1);
    src_dims.push_back(rows);
    src_dims.push_back(cols);
    for (size_t k = 0; k < mine.rank(); ++k) dst_dims[batch_.rank() - mine.rank() + k] = mine[k];
    dst_dims[r - 2] = rows;
    dst_dims[r - 1] = cols;
    refuse_if(r > static_cast<size_t>(kernels::kMaxRank), "rank {} is above the kernels' {}", r, kernels::kMaxRank);
    kernels::sum_to_shape(full, src_dims.data(), dst, dst_dims.data(), static_cast<int>(r), nullptr);
    check_launch("sum_to_shape");
  }

  DType dtype_ = DType::f32;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  Shape batch_a_, batch_b_, batch_;
  std::vector<int64_t> off_a_, off_b_;
  int64_t stride_a_ = 0, stride_b_ = 0;
  DeviceBuffer scratch_a_, scratch_b_;
};

}  // namespace

void register_matmul_op(OpRegistry& r) {
  add_op(
      r, "MatMul", [](const OpSpec& s) { return std::make_unique<MatMulOp>(s); },
      {.backward = true,
       .any_dtype = true,
       .notes = "f32 on cublasSgemm(StridedBatched), TF32 only with --math tf32; f16 and bf16 on tensor cores "
                "(f32 accumulation); batch axes broadcast (in f32 only where an operand is broadcast)"});
}

}  // namespace d5::cuda
