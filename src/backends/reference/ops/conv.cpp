// Conv (1-D, 2-D, 3-D, ...): for each image and group, im2col turns the input into a matrix whose
// columns are the receptive fields, and one GEMM with the weights produces the output:
//   Y[n, g] (M/group x P) = W[g] (M/group x K) * col(X[n, g]) (K x P),  K = C/group * kernel size.
// Backward reuses the same two pieces: dW[g] += dY[n, g] * col^T and dX = col2im(W[g]^T * dY[n, g]).
//
// Two forward algorithms, as cuDNN offers several with different workspace needs:
// - "reference" (per image): one im2col matrix per thread; small GEMMs, one per image and group.
// - "reference:batched-im2col": the im2col matrices of the whole batch side by side, so each group
//   is one GEMM with N times more columns. Faster where one image's GEMM is too small to use the
//   machine (deep layers with few positions), but its workspace grows with the batch; it refuses
//   when that exceeds the spec's workspace limit (default kBatchedDefaultLimit), and the registry
//   falls back to the per-image algorithm. This is what micro-batching (docs/microbatching.md)
//   trades against: smaller batches fit the faster algorithm under a workspace limit.
#include "../gemm_kernel.h"
#include "nn_common.h"
#include "widened.h"

namespace d5::reference {

namespace {

class ConvOp : public ConvLikeOp<ConvOp> {
 public:
  ConvOp(const OpSpec& spec, const ConvDims& d, const Window& w) : ConvLikeOp(spec, d, w, false) {
    // A 1x1 kernel with unit strides and no padding reads every pixel once, in order: the image
    // is its own im2col matrix.
    direct_ = true;
    for (size_t i = 0; i < w_.rank(); ++i)
      direct_ =
          direct_ && w_.kernel[i] == 1 && w_.strides[i] == 1 && w_.pads_begin[i] == 0 && w_.pads_end[i] == 0;
  }

  double flops() const override { return conv_flops(d_, w_, false); }

  // K: the im2col rows of one group, the GEMM's inner dimension.
  int64_t rows() const { return d_.c / d_.group * w_.kernel_size(); }
  int64_t col_size() const { return rows() * w_.position_count(); }

 private:
  friend class ConvLikeOp<ConvOp>;

  template <typename T> void run_forward(const T* x, const T* wt, const T* b, T* y) {
    const int64_t cg = d_.c / d_.group, mg = d_.m / d_.group, K = rows();
    const int64_t P = w_.position_count(), image = w_.image_size();
    for_each_image_group<T>(nullptr, [&](int64_t n, int64_t g, T* buf, T*) {
      const T* col = x + (n * d_.c + g * cg) * image;
      if (buf) {
        im2col(w_, cg, col, buf);
        col = buf;
      }
      // The bias goes in first and the GEMM accumulates onto it (beta = 1).
      T* yi = y + (n * d_.m + g * mg) * P;
      if (b)
        for (int64_t m = 0; m < mg; ++m) std::fill(yi + m * P, yi + (m + 1) * P, b[g * mg + m]);
      gemm<T>(mg, P, K, T(1), row_major(wt + g * mg * K, K), row_major(col, P), b ? T(1) : T(0),
              row_major(yi, P));
    });
  }

  template <typename T> void run_backward(const T* x, const T* wt, const T* dy, T* dx, T* dw) {
    const int64_t cg = d_.c / d_.group, mg = d_.m / d_.group, K = rows();
    const int64_t P = w_.position_count(), image = w_.image_size();
    for_each_image_group<T>(dw, [&](int64_t n, int64_t g, T* buf, T* dw_part) {
      const T* xi = x + (n * d_.c + g * cg) * image;
      const auto dyi = row_major(dy + (n * d_.m + g * mg) * P, P);
      if (dw_part) {  // dW[g] += dY[n, g] col^T
        const T* col = xi;
        if (buf) {
          im2col(w_, cg, xi, buf);
          col = buf;
        }
        gemm<T>(mg, K, P, T(1), dyi, row_major(col, P).t(), T(1), row_major(dw_part + g * mg * K, K));
      }
      if (dx) {  // dX[n, g] = col2im(W[g]^T dY[n, g])
        T* dxi = dx + (n * d_.c + g * cg) * image;
        gemm<T>(K, P, mg, T(1), row_major(wt + g * mg * K, K).t(), dyi, T(0), row_major(buf ? buf : dxi, P));
        if (buf) col2im(w_, cg, buf, dxi);
      }
    });
  }
};

// Without a limit in the spec, the batched algorithm keeps its workspace under this: enough for
// the deep layers where it pays off at common batch sizes, never the whole memory of a small
// machine for a first layer at a large batch.
constexpr int64_t kBatchedDefaultLimit = int64_t{256} << 20;

// Forward with the batched algorithm; backward (inherited) is the per-image one: it needs no
// state from forward, so the two compute the same gradients.
class BatchedConvOp final : public ConvOp {
 public:
  using ConvOp::ConvOp;

  std::string implementation() const override { return "reference:batched-im2col"; }

  // The K x (N * P) im2col matrix and the M/group x (N * P) product of one group.
  static int64_t workspace_for(const ConvOp& op, int64_t n, int64_t m_per_group, int64_t positions, DType t) {
    return (op.rows() + m_per_group) * n * positions * static_cast<int64_t>(dtype_size(t));
  }
  int64_t workspace_bytes() const override {
    return workspace_for(*this, d_.n, d_.m / d_.group, w_.position_count(), spec_.inputs[0].dtype);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      run<T>(in[0].data_as<T>(), in[1].data_as<T>(), d_.bias ? in[2].data_as<T>() : nullptr, out[0].data_as<T>());
    });
  }

 private:
  template <typename T> void run(const T* x, const T* wt, const T* b, T* y) {
    const int64_t cg = d_.c / d_.group, mg = d_.m / d_.group, K = rows();
    const int64_t P = w_.position_count(), image = w_.image_size(), NP = d_.n * P;
    T* col = batch_workspace_.get<T>(K * NP + mg * NP);
    T* prod = col + K * NP;
    for (int64_t g = 0; g < d_.group; ++g) {
      for (int64_t n = 0; n < d_.n; ++n) im2col(w_, cg, x + (n * d_.c + g * cg) * image, col + n * P, NP);
      gemm<T>(mg, NP, K, T(1), row_major(wt + g * mg * K, K), row_major<const T>(col, NP), T(0),
              row_major(prod, NP));
      // prod is [M/group][N][P]; Y is [N][M][P].
      const int items = item_threads(d_.n * mg, static_cast<double>(NP * mg));
#pragma omp parallel for collapse(2) if (items > 1)
      for (int64_t n = 0; n < d_.n; ++n)
        for (int64_t m = 0; m < mg; ++m) {
          const T* src = prod + m * NP + n * P;
          T* dst = y + (n * d_.m + g * mg + m) * P;
          const T bias = b ? b[g * mg + m] : T(0);
          for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + bias;
        }
    }
  }

  Workspace batch_workspace_;
};

}  // namespace

void register_conv_ops(OpRegistry& r) {
  auto geometry = [](const OpSpec& s) {
    const ConvDims d = conv_dims(s, false);
    return std::pair{d, sliding_window(s, parse_window_attrs(s, d.image.size(), d.kernel), d.image, false)};
  };
  // Registered first: the registry asks implementations in order, so the batched algorithm runs
  // whenever its workspace fits and the per-image one otherwise.
  r.add(OpImplementation{
      .op_type = "Conv",
      .backend = "reference",
      .name = "reference:batched-im2col",
      .backward = true,
      .create = widening([geometry](const OpSpec& s) -> OpCreateResult {
        const auto [d, w] = geometry(s);
        if (d.n == 1) return std::string("a batch of one image: the per-image algorithm runs the same GEMM without the copy");
        auto op = std::make_unique<BatchedConvOp>(s, d, w);
        const int64_t limit = s.workspace_limit >= 0 ? s.workspace_limit : kBatchedDefaultLimit;
        if (op->workspace_bytes() > limit)
          return fmt::format("batched im2col needs {} bytes of workspace, over the limit of {} bytes",
                             op->workspace_bytes(), limit);
        return op;
      }),
      .notes = fmt::format("one GEMM per group over the whole batch; refuses when its workspace (im2col of the "
                           "batch) exceeds the spec's workspace limit (default {} MiB)",
                           kBatchedDefaultLimit >> 20)});
  add_op(r, "Conv", true, widening([geometry](const OpSpec& s) -> OpCreateResult {
    const auto [d, w] = geometry(s);
    auto op = std::make_unique<ConvOp>(s, d, w);
    if (s.workspace_limit >= 0 && op->workspace_bytes() > s.workspace_limit)
      return fmt::format("per-image im2col needs {} bytes of workspace, over the limit of {} bytes",
                         op->workspace_bytes(), s.workspace_limit);
    return op;
  }));
}

}  // namespace d5::reference
