// The update rules of src/lv2/optim on the GPU, element for element. Roundings are spelled out
// with the _rn intrinsics, since nvcc would otherwise contract a * b + c into one FMA where the
// host's loop rounds twice; madd is the rules' own single rounding (ATen's add with alpha).
#include <algorithm>
#include <vector>

#include "kernel_grid.h"
#include "update_kernels.h"

namespace d5::cuda::kernels {
namespace {

using grid::kThreads;

struct UpdateBatch {
  FusedUpdate u[kUpdatesPerLaunch];
  int32_t first_block[kUpdatesPerLaunch + 1];  // block range of each record
  int32_t count;
};

__device__ __forceinline__ float madd(float self, float other, float alpha) { return __fmaf_rn(other, alpha, self); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float max_of(float a, float b) { return a < b ? b : a; }  // std::max's NaN rule

__device__ void sgd(const FusedUpdate& u, int64_t b, int64_t e) {
  const SgdScalars s = u.scalars.sgd;
  const float* g = u.g;
  float* p = u.p;
  float* v = u.state[0];
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    float d = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    if (v) {
      const float vi = s.first ? d : madd(mul(v[i], s.mu), d, s.damp);
      v[i] = vi;
      d = s.nesterov ? madd(d, vi, s.mu) : vi;
    }
    p[i] = madd(p[i], d, s.neg_lr);
  }
}

__device__ void adam(const FusedUpdate& u, int64_t b, int64_t e) {
  const AdamScalars s = u.scalars.adam;
  const float* g = u.g;
  float *p = u.p, *m = u.state[0], *v = u.state[1], *vmax = u.state[2];
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    const float pi = s.decay != 1 ? mul(p[i], s.decay) : p[i];
    const float gi = s.wd != 0 ? madd(g[i], pi, s.wd) : g[i];
    const float mi = madd(mul(m[i], s.b1), gi, s.c1);
    const float vi = add(mul(v[i], s.b2), mul(mul(s.c2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float vu = vmax ? (vmax[i] = max_of(vmax[i], vi)) : vi;
    p[i] = add(pi, div(mul(s.neg_step_size, mi), add(div(__fsqrt_rn(vu), s.bc2_sqrt), s.eps)));
  }
}

__device__ void adagrad(const FusedUpdate& u, int64_t b, int64_t e) {
  const AdagradScalars s = u.scalars.adagrad;
  const float* g = u.g;
  float *p = u.p, *sum = u.state[0];
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    const float gi = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    const float si = add(sum[i], mul(gi, gi));
    sum[i] = si;
    p[i] = add(p[i], div(mul(s.neg_clr, gi), add(__fsqrt_rn(si), s.eps)));
  }
}

__device__ void rmsprop(const FusedUpdate& u, int64_t b, int64_t e) {
  const RmsPropScalars s = u.scalars.rmsprop;
  const float* g = u.g;
  float *p = u.p, *a = u.state[0], *ga = u.state[1], *buf = u.state[2];
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    const float gi = s.wd != 0 ? madd(g[i], p[i], s.wd) : g[i];
    const float ai = add(mul(a[i], s.alpha), mul(mul(s.c, gi), gi));
    a[i] = ai;
    float avg;
    if (ga) {
      const float gai = madd(mul(ga[i], s.alpha), gi, s.c);
      ga[i] = gai;
      avg = add(__fsqrt_rn(add(ai, mul(mul(-1.f, gai), gai))), s.eps);
    } else {
      avg = add(__fsqrt_rn(ai), s.eps);
    }
    if (buf) {
      buf[i] = add(mul(buf[i], s.mu), div(mul(1.f, gi), avg));
      p[i] = madd(p[i], buf[i], s.neg_lr);
    } else {
      p[i] = add(p[i], div(mul(s.neg_lr, gi), avg));
    }
  }
}

// AcceleGrad's two steps, the first step's copy, and the executor's gradient sums.
__device__ void elementwise_steps(const FusedUpdate& u, int64_t b, int64_t e) {
  const AcceleGradScalars s = u.scalars.accelegrad;
  const float* g = u.g;
  float *p = u.p, *z = u.state[0];
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    if (u.kind == UpdateKind::accelegrad_interpolate) {
      p[i] = add(mul(s.tau, z[i]), mul(s.rest, p[i]));
    } else if (u.kind == UpdateKind::accelegrad_step) {
      z[i] = sub(z[i], mul(s.step_z, g[i]));
      p[i] = sub(p[i], mul(s.step_y, g[i]));
    } else if (u.kind == UpdateKind::accumulate) {
      p[i] = add(p[i], g[i]);
    } else {
      z[i] = p[i];  // copy_param
    }
  }
}

__global__ void __launch_bounds__(kThreads) fused_update_kernel(UpdateBatch batch) {
  int r = 0;
  while (r + 1 < batch.count && static_cast<int32_t>(blockIdx.x) >= batch.first_block[r + 1]) ++r;
  const FusedUpdate u = batch.u[r];
  const int64_t begin = int64_t{static_cast<int32_t>(blockIdx.x) - batch.first_block[r]} * kUpdateChunk;
  const int64_t end = begin + kUpdateChunk < u.n ? begin + kUpdateChunk : u.n;
  switch (u.kind) {
    case UpdateKind::sgd: sgd(u, begin, end); break;
    case UpdateKind::adam: adam(u, begin, end); break;
    case UpdateKind::adagrad: adagrad(u, begin, end); break;
    case UpdateKind::rmsprop: rmsprop(u, begin, end); break;
    default: elementwise_steps(u, begin, end); break;
  }
}

struct NormBatch {
  const float* x[kUpdatesPerLaunch];
  int64_t n[kUpdatesPerLaunch];
  int32_t first_block[kUpdatesPerLaunch + 1];
  int32_t count;
};

// One block per chunk: each thread sums its strided elements in order, then a fixed tree.
__global__ void __launch_bounds__(kThreads) chunk_squares_kernel(NormBatch batch, double* partials) {
  __shared__ double sums[kThreads];
  int r = 0;
  while (r + 1 < batch.count && static_cast<int32_t>(blockIdx.x) >= batch.first_block[r + 1]) ++r;
  const float* x = batch.x[r];
  const int64_t begin = int64_t{static_cast<int32_t>(blockIdx.x) - batch.first_block[r]} * kUpdateChunk;
  const int64_t end = begin + kUpdateChunk < batch.n[r] ? begin + kUpdateChunk : batch.n[r];
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += static_cast<double>(x[i]) * x[i];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

}  // namespace

int64_t norm_chunks(int64_t n) { return std::max<int64_t>(1, (n + kUpdateChunk - 1) / kUpdateChunk); }

namespace {
// Records [first, first + count) of a launch: batch.first_block gets each one's first block (and
// the total after the last), take(r, i) copies record i into slot r. Returns the launch's blocks.
template <typename Batch, typename Take>
int32_t plan_launch(Batch& batch, size_t first, size_t count, const int64_t* sizes, Take take) {
  batch.count = static_cast<int32_t>(std::min<size_t>(kUpdatesPerLaunch, count - first));
  int32_t blocks = 0;
  for (int32_t r = 0; r < batch.count; ++r) {
    take(r, first + r);
    batch.first_block[r] = blocks;
    blocks += static_cast<int32_t>(norm_chunks(sizes[first + r]));
  }
  batch.first_block[batch.count] = blocks;
  return blocks;
}
}  // namespace

void fused_updates(const FusedUpdate* updates, size_t count, cudaStream_t stream) {
  std::vector<int64_t> sizes(count);
  for (size_t i = 0; i < count; ++i) sizes[i] = updates[i].n;
  for (size_t first = 0; first < count; first += kUpdatesPerLaunch) {
    UpdateBatch batch{};
    const int32_t blocks =
        plan_launch(batch, first, count, sizes.data(), [&](int32_t r, size_t i) { batch.u[r] = updates[i]; });
    fused_update_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch);
  }
}

void chunk_squared_sums(const float* const* tensors, const int64_t* sizes, size_t count, double* partials,
                        cudaStream_t stream) {
  for (size_t first = 0; first < count; first += kUpdatesPerLaunch) {
    NormBatch batch{};
    const int32_t blocks = plan_launch(batch, first, count, sizes, [&](int32_t r, size_t i) {
      batch.x[r] = tensors[i];
      batch.n[r] = sizes[i];
    });
    chunk_squares_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch, partials);
    partials += blocks;
  }
}

}  // namespace d5::cuda::kernels
