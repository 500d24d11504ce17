#pragma once
// Host entry points of the loss kernels (loss_kernels.cu): SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss and MSELoss. Scores are viewed as [n, c, d]: the class axis in the
// middle, one target per (n, d) position. Plain C++17; launches on `stream`, never waits.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.
inline namespace movement {

enum class LossReduction : int { None = 0, Sum = 1, Mean = 2 };

// What every class-loss kernel needs to read targets: int64 (is64) or int32 labels, optional
// f32 class weights, and the ignored label.
struct Targets {
  const void* labels = nullptr;
  bool is64 = true;
  const float* weights = nullptr;
  bool has_ignore = false;
  int64_t ignore = 0;
  int64_t n = 0, c = 0, d = 1;
};

// logp = log_softmax(x) along the class axis, per lane in double with the maximum subtracted.
void log_softmax_lanes(const float* x, float* logp, int64_t n, int64_t c, int64_t d, cudaStream_t stream);

// Per position: loss[p] = -w[t] * logp[n, t, d] and weight[p] = w[t] (both 0 where ignored or
// out of range); a target outside [0, c) that is not ignored lowers *bad_pos (atomicMin).
void nll_positions(const float* logp, const Targets& t, double* loss, double* weight, unsigned long long* bad_pos,
                   cudaStream_t stream);
// out = loss per position (None), their sum (Sum) or sum / total weight (Mean); *total_w gets
// the total weight. Sums in a fixed order (one block).
void finish_loss(const double* loss, const double* weight, int64_t positions, LossReduction r, float* out,
                 double* total_w, cudaStream_t stream);

// Upstream gradient of position p's loss: gy[p] (None), gy[0] (Sum), gy[0] / total_w (Mean);
// zero when gy is null.
// SoftmaxCrossEntropyLoss: dlogp = glogp (null: 0) minus w * up at the target, then
// gx = dlogp - exp(logp) * sum(dlogp) per lane.
void softmax_xent_backward(const float* logp, const float* gy, const float* glogp, const Targets& t,
                           const double* total_w, LossReduction r, float* gx, cudaStream_t stream);
// NegativeLogLikelihoodLoss: gx = 0 except -w * up at each target.
void nll_backward(const float* gy, const Targets& t, const double* total_w, LossReduction r, float* gx,
                  cudaStream_t stream);

// MSELoss: (p - t)^2 per element (None), summed (Sum) or averaged (Mean), in double.
void mse_forward(const float* p, const float* t, int64_t n, LossReduction r, float* out, cudaStream_t stream);
// gp = 2 (p - t) * up, gt = -gp (either may be null); up from gy as above with total n.
void mse_backward(const float* p, const float* t, const float* gy, int64_t n, LossReduction r, float* gp,
                  float* gt, cudaStream_t stream);

}  // inline namespace movement
}  // namespace d5::cuda
