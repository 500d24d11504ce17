#pragma once
// Host entry points of the reduction kernels (reduce_kernels.cu): ReduceSum/Mean/Max/L2 and
// their gradients, also used to sum gradients back over broadcast axes (Expand, Where,
// LayerNormalization's Scale and B). Plain C++17; launches on `stream`, never waits.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "movement_kernels.h"

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.
inline namespace movement {

enum class ReduceKind : int { Sum = 0, Mean = 1, Max = 2, L2 = 3 };

// Output o reduces the `group` elements x[base(o) + offset(j)], j < group, where base walks the
// kept axes (out_dims, strides in input elements) and offset the reduced ones (red_dims).
struct ReducePlan {
  int out_rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};
  int red_rank = 0;
  int64_t red_dims[kMaxRank] = {};
  int64_t red_strides[kMaxRank] = {};
};

// y[o] for o < outputs; sums in double. Mean divides by group (NaN when empty), L2 takes the
// square root of the sum of squares, Max keeps the first maximum (NaN wins; -inf when empty)
// and writes its flat input index (-1 when empty) to argmax, which may be null otherwise.
void reduce_f32(const float* x, float* y, int64_t* argmax, int64_t outputs, int64_t group, const ReducePlan& p,
                ReduceKind kind, cudaStream_t stream);

// Gradient of Sum / Mean / L2: gx[i] = gy[to_out(i)] (/ group for Mean; * x[i] / y for L2, 0
// where y is 0); to_out maps input positions (dims of x) to output offsets (0 strides on reduced axes).
void reduce_backward_f32(const float* gy, const float* x, const float* y, float* gx, int64_t n,
                         const StridedMap& to_out, ReduceKind kind, int64_t group, cudaStream_t stream);
// Gradient of Max: gx is zeroed, then gx[argmax[o]] = gy[o] where argmax[o] >= 0.
void reduce_max_backward_f32(const float* gy, const int64_t* argmax, float* gx, int64_t n, int64_t outputs,
                             cudaStream_t stream);

}  // inline namespace movement
}  // namespace d5::cuda
