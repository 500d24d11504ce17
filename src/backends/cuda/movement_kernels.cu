// Data-movement kernels of the CUDA backend (interfaces in movement_kernels.h). Elements move
// as unsigned words of their size, so every dtype goes through the same code; only gradients
// are f32. Each output element is written by one thread, and sums (Pad's and Gather's
// gradients) are accumulated in double in a fixed order, so results never depend on scheduling.
#include "kernel_grid.h"
#include "op_stream.h"
#include "movement_kernels.h"

#include <cstdint>

namespace d5::cuda {
inline namespace movement {

namespace {

using grid::blocks_for;
using grid::kThreads;

// Enough blocks to cover n with grid-stride loops, capped so huge tensors do not overflow the grid.

template <int N> struct WordOf;
template <> struct WordOf<1> { using type = uint8_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<8> { using type = uint64_t; };

__device__ int64_t map_offset(const StridedMap& m, int64_t i) {
  int64_t off = m.base;
  for (int k = m.rank - 1; k >= 0; --k) {
    const int64_t d = m.dims[k];
    off += (i % d) * m.strides[k];
    i /= d;
  }
  return off;
}

template <typename W>
__global__ void strided_gather_kernel(const W* in, W* out, int64_t n, StridedMap m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[map_offset(m, i)];
}

__global__ void strided_scatter_kernel(const float* src, float* dst, int64_t n, StridedMap m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[map_offset(m, i)] = src[i];
}

template <typename W>
__global__ void copy_rows_kernel(const W* src, W* dst, int64_t outer, int64_t count, int64_t src_row,
                                 int64_t src_off, int64_t dst_row, int64_t dst_off) {
  const int64_t n = outer * count;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = i / count, k = i % count;
    dst[o * dst_row + dst_off + k] = src[o * src_row + src_off + k];
  }
}

template <typename W>
__global__ void pad_kernel(const W* in, W* out, int64_t n, PadMap m, const int64_t* tables, const W* fill_dev,
                           W fill) {
  const W f = fill_dev ? *fill_dev : fill;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i, off = 0;
    bool outside = false;
    for (int k = m.rank - 1; k >= 0; --k) {
      const int64_t c = tables[m.table_off[k] + rest % m.out_dims[k]];
      rest /= m.out_dims[k];
      outside = outside || c < 0;
      off += c * m.in_strides[k];
    }
    out[i] = outside ? f : in[off];
  }
}

// Visits the combinations of per-axis output coordinates like an odometer, last axis fastest,
// which is ascending output order: the reference's order of accumulation.
__global__ void pad_backward_kernel(const float* gy, float* gx, int64_t n, PadGradMap m, const int64_t* ptrs,
                                    const int64_t* lists) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t lo[kMaxRank], hi[kMaxRank], cur[kMaxRank];
    int64_t rest = i;
    bool empty = false;
    for (int k = m.rank - 1; k >= 0; --k) {
      const int64_t c = rest % m.in_dims[k];
      rest /= m.in_dims[k];
      lo[k] = ptrs[m.ptr_off[k] + c];
      hi[k] = ptrs[m.ptr_off[k] + c + 1];
      cur[k] = lo[k];
      empty = empty || lo[k] == hi[k];
    }
    double acc = 0;
    while (!empty) {
      int64_t off = 0;
      for (int k = 0; k < m.rank; ++k) off += lists[cur[k]] * m.out_strides[k];
      acc += static_cast<double>(gy[off]);
      int k = m.rank - 1;
      while (k >= 0 && ++cur[k] == hi[k]) {
        cur[k] = lo[k];
        --k;
      }
      empty = k < 0;
    }
    gx[i] = static_cast<float>(acc);
  }
}

template <typename I>
__global__ void gather_check_kernel(const I* idx, int64_t n, int64_t extent, int64_t* norm,
                                    unsigned long long* bad_pos) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    const auto v = static_cast<int64_t>(idx[j]);
    const bool ok = v >= -extent && v < extent;
    // The flag is an integer minimum: the first bad position, whatever the schedule.
    if (!ok) atomicMin(bad_pos, static_cast<unsigned long long>(j));
    norm[j] = !ok ? 0 : v < 0 ? v + extent : v;
  }
}

template <typename W>
__global__ void gather_rows_kernel(const W* data, W* out, const int64_t* norm, int64_t outer, int64_t n,
                                   int64_t extent, int64_t inner) {
  const int64_t total = outer * n * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i % inner, row = i / inner, j = row % n, o = row / n;
    out[i] = data[(o * extent + norm[j]) * inner + k];
  }
}

__global__ void gather_backward_kernel(const float* gy, float* gx, const int64_t* order, const int64_t* first,
                                       int64_t outer, int64_t n, int64_t extent, int64_t inner) {
  const int64_t total = outer * extent * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i % inner, row = i / inner, e = row % extent, o = row / extent;
    double acc = 0;
    for (int64_t s = first[e]; s < first[e + 1]; ++s) acc += static_cast<double>(gy[(o * n + order[s]) * inner + k]);
    gx[i] = static_cast<float>(acc);
  }
}

__global__ void count_kernel(const int64_t* norm, int64_t n, unsigned long long* counts) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x)
    atomicAdd(counts + norm[j], 1ull);  // integer counts: the same whatever the order
}

// One block: exclusive scan of counts[0, extent) into first[0, extent]; counts become the
// placement cursors (first[e]).
constexpr int kScanThreads = 1024;
__global__ void scan_kernel(int64_t* counts, int64_t* first, int64_t extent) {
  __shared__ int64_t part[kScanThreads];
  const int64_t per = (extent + kScanThreads - 1) / kScanThreads;
  const int64_t lo = threadIdx.x * per, hi = lo + per < extent ? lo + per : extent;
  int64_t s = 0;
  for (int64_t e = lo; e < hi; ++e) s += counts[e];
  part[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int t = 0; t < kScanThreads; ++t) {
      const int64_t v = part[t];
      part[t] = run;
      run += v;
    }
    first[extent] = run;
  }
  __syncthreads();
  int64_t run = part[threadIdx.x];
  for (int64_t e = lo; e < hi; ++e) {
    const int64_t c = counts[e];
    first[e] = run;
    counts[e] = run;
    run += c;
  }
}

// One block places the indices chunk by chunk; within a chunk each thread counts the earlier
// threads with its key, so ties keep index order without atomics.
__global__ void place_kernel(const int64_t* norm, int64_t n, int64_t* cursor, int64_t* order) {
  __shared__ int64_t keys[kScanThreads];
  for (int64_t base = 0; base < n; base += kScanThreads) {
    const int64_t j = base + threadIdx.x;
    const bool live = j < n;
    keys[threadIdx.x] = live ? norm[j] : -1;
    __syncthreads();
    int64_t key = -1, before = 0, after = 0;
    if (live) {
      key = keys[threadIdx.x];
      for (int t = 0; t < kScanThreads; ++t) {
        if (keys[t] != key) continue;
        before += t < static_cast<int>(threadIdx.x);
        after += t > static_cast<int>(threadIdx.x);
      }
      order[cursor[key] + before] = j;
    }
    __syncthreads();  // every thread has read its cursor before the last of each key moves it
    if (live && after == 0) cursor[key] += before + 1;
    __syncthreads();
  }
}

template <typename W>
__global__ void where_kernel(const unsigned char* cond, const W* x, const W* y, W* out, int64_t n, StridedMap cm,
                             StridedMap xm, StridedMap ym) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = cond[map_offset(cm, i)] ? x[map_offset(xm, i)] : y[map_offset(ym, i)];
}

__global__ void where_mask_kernel(const unsigned char* cond, const float* gy, float* full, int64_t n,
                                  StridedMap cm, bool to_x) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    full[i] = (cond[map_offset(cm, i)] != 0) == to_x ? gy[i] : 0.0f;
}

// Calls f.template operator()<W>() with the word type of elem_size.
template <typename F>
void by_size(int elem_size, F&& f) {
  switch (elem_size) {
    case 1: f(WordOf<1>{}); break;
    case 2: f(WordOf<2>{}); break;
    case 4: f(WordOf<4>{}); break;
    default: f(WordOf<8>{}); break;
  }
}

}  // namespace

void strided_gather(const void* in, void* out, int64_t n, const StridedMap& m, int elem_size,
                    cudaStream_t stream) {
  if (n <= 0) return;
  by_size(elem_size, [&](auto w) {
    using W = typename decltype(w)::type;
    strided_gather_kernel<W><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<const W*>(in),
                                                                      static_cast<W*>(out), n, m);
  });
}

void strided_scatter_f32(const float* src, float* dst, int64_t n, const StridedMap& m, cudaStream_t stream) {
  if (n <= 0) return;
  strided_scatter_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(src, dst, n, m);
}

void copy_rows(const void* src, void* dst, int64_t outer, int64_t count, int64_t src_row, int64_t src_off,
               int64_t dst_row, int64_t dst_off, int elem_size, cudaStream_t stream) {
  if (outer <= 0 || count <= 0) return;
  by_size(elem_size, [&](auto w) {
    using W = typename decltype(w)::type;
    copy_rows_kernel<W><<<blocks_for(outer * count), kThreads, 0, launch_stream(stream)>>>(
        static_cast<const W*>(src), static_cast<W*>(dst), outer, count, src_row, src_off, dst_row, dst_off);
  });
}

void pad_forward(const void* in, void* out, int64_t n, const PadMap& m, const int64_t* tables,
                 const void* fill_dev, uint64_t fill_bits, int elem_size, cudaStream_t stream) {
  if (n <= 0) return;
  by_size(elem_size, [&](auto w) {
    using W = typename decltype(w)::type;
    pad_kernel<W><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<const W*>(in), static_cast<W*>(out), n, m,
                                                          tables, static_cast<const W*>(fill_dev),
                                                          static_cast<W>(fill_bits));
  });
}

void pad_backward_f32(const float* gy, float* gx, int64_t n, const PadGradMap& m, const int64_t* ptrs,
                      const int64_t* lists, cudaStream_t stream) {
  if (n <= 0) return;
  pad_backward_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(gy, gx, n, m, ptrs, lists);
}

void gather_check_indices(const void* indices, bool is64, int64_t n, int64_t extent, int64_t* norm,
                          unsigned long long* bad_pos, cudaStream_t stream) {
  if (n <= 0) return;
  if (is64)
    gather_check_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<const int64_t*>(indices), n, extent,
                                                                norm, bad_pos);
  else
    gather_check_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(static_cast<const int32_t*>(indices), n, extent,
                                                                norm, bad_pos);
}

void gather_rows(const void* data, void* out, const int64_t* norm, int64_t outer, int64_t n, int64_t extent,
                 int64_t inner, int elem_size, cudaStream_t stream) {
  const int64_t total = outer * n * inner;
  if (total <= 0) return;
  by_size(elem_size, [&](auto w) {
    using W = typename decltype(w)::type;
    gather_rows_kernel<W><<<blocks_for(total), kThreads, 0, launch_stream(stream)>>>(
        static_cast<const W*>(data), static_cast<W*>(out), norm, outer, n, extent, inner);
  });
}

void gather_sort_indices(const int64_t* norm, int64_t n, int64_t extent, int64_t* counts, int64_t* first,
                         int64_t* order, cudaStream_t stream) {
  cudaMemsetAsync(counts, 0, static_cast<size_t>(extent + 1) * sizeof(int64_t), launch_stream(stream));
  if (n > 0)
    count_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(norm, n, reinterpret_cast<unsigned long long*>(counts));
  scan_kernel<<<1, kScanThreads, 0, launch_stream(stream)>>>(counts, first, extent);
  if (n > 0) place_kernel<<<1, kScanThreads, 0, launch_stream(stream)>>>(norm, n, counts, order);
}

void gather_backward_f32(const float* gy, float* gx, const int64_t* order, const int64_t* first,
                         int64_t outer, int64_t n, int64_t extent, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * extent * inner;
  if (total <= 0) return;
  gather_backward_kernel<<<blocks_for(total), kThreads, 0, launch_stream(stream)>>>(gy, gx, order, first, outer, n, extent,
                                                                     inner);
}

void where_forward(const unsigned char* cond, const void* x, const void* y, void* out, int64_t n,
                   const StridedMap& cm, const StridedMap& xm, const StridedMap& ym, int elem_size,
                   cudaStream_t stream) {
  if (n <= 0) return;
  by_size(elem_size, [&](auto w) {
    using W = typename decltype(w)::type;
    where_kernel<W><<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(cond, static_cast<const W*>(x),
                                                            static_cast<const W*>(y), static_cast<W*>(out), n,
                                                            cm, xm, ym);
  });
}

void where_mask_f32(const unsigned char* cond, const float* gy, float* full, int64_t n, const StridedMap& cm,
                    bool to_x, cudaStream_t stream) {
  if (n <= 0) return;
  where_mask_kernel<<<blocks_for(n), kThreads, 0, launch_stream(stream)>>>(cond, gy, full, n, cm, to_x);
}

}  // inline namespace movement
}  // namespace d5::cuda
