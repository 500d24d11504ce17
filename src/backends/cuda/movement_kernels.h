#pragma once
// Host entry points of the data-movement kernels (movement_kernels.cu): Transpose, Slice,
// Expand (strided gathers), Concat/Split (row blocks), Pad, Gather and Where. Plain C++17 so
// that nvcc never sees d5's C++20 headers; every function launches on `stream` and returns
// without waiting, except gather_check_indices's caller, which reads the bad-index flag back.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.
inline namespace movement {

inline constexpr int kMaxRank = 8;

// out[i] = in[base + sum_k coord_k(i) * strides[k]], coords of i in the row-major `dims`.
// Strides are in elements and may be 0 (broadcast) or negative (Slice's negative steps).
struct StridedMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t base = 0;
};

// Elements of `elem_size` bytes (1, 2, 4 or 8) are moved as raw words.
void strided_gather(const void* in, void* out, int64_t n, const StridedMap& m, int elem_size,
                    cudaStream_t stream);
// dst[map(i)] = src[i] for the n positions of the map; the map must be injective.
void strided_scatter_f32(const float* src, float* dst, int64_t n, const StridedMap& m, cudaStream_t stream);

// For each of `outer` rows: dst[o * dst_row + dst_off + k] = src[o * src_row + src_off + k],
// k < count; everything in elements of `elem_size` bytes.
void copy_rows(const void* src, void* dst, int64_t outer, int64_t count, int64_t src_row, int64_t src_off,
               int64_t dst_row, int64_t dst_off, int elem_size, cudaStream_t stream);

// Pad: per output axis k a table (at tables + table_off[k]) of the input coordinate each output
// coordinate reads, -1 outside the input; there the element is *fill_dev, or fill_bits when
// fill_dev is null.
struct PadMap {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int64_t table_off[kMaxRank] = {};
};
void pad_forward(const void* in, void* out, int64_t n, const PadMap& m, const int64_t* tables,
                 const void* fill_dev, uint64_t fill_bits, int elem_size, cudaStream_t stream);
// Pad's backward: per input axis k, input coordinate c is read by the output coordinates
// lists[ptr_off[k] + c] .. lists[ptr_off[k] + c + 1] (indices into `lists`, CSR style);
// gx[i] is the sum over every combination, in output order (double accumulation).
struct PadGradMap {
  int rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};
  int64_t ptr_off[kMaxRank] = {};
};
void pad_backward_f32(const float* gy, float* gx, int64_t n, const PadGradMap& m, const int64_t* ptrs,
                      const int64_t* lists, cudaStream_t stream);

// Gather. Checks the n indices (int64 when is64, else int32) against [-extent, extent), writes
// them wrapped into norm, and lowers *bad_pos (preset to all ones) to the first bad position.
void gather_check_indices(const void* indices, bool is64, int64_t n, int64_t extent, int64_t* norm,
                          unsigned long long* bad_pos, cudaStream_t stream);
// out[o, j, :] = data[o, norm[j], :] for o < outer, j < n, rows of `inner` elements.
void gather_rows(const void* data, void* out, const int64_t* norm, int64_t outer, int64_t n, int64_t extent,
                 int64_t inner, int elem_size, cudaStream_t stream);
// gx[o, e, k] = sum over j with norm[j] == e (ascending j) of gy[o, j, k]. `order` holds the
// index positions j sorted stably by norm[j]; `first[e]` .. `first[e + 1]` the run of e in it.
void gather_backward_f32(const float* gy, float* gx, const int64_t* order, const int64_t* first,
                         int64_t outer, int64_t n, int64_t extent, int64_t inner, cudaStream_t stream);
// Builds `order` and `first` (extent + 1 entries) from norm with a counting sort whose ties
// keep index order. `counts` needs extent + 1 int64 scratch.
void gather_sort_indices(const int64_t* norm, int64_t n, int64_t extent, int64_t* counts, int64_t* first,
                         int64_t* order, cudaStream_t stream);

// Where: out[i] = cond[c(i)] ? x[xm(i)] : y[ym(i)]; the three maps share the output dims.
void where_forward(const unsigned char* cond, const void* x, const void* y, void* out, int64_t n,
                   const StridedMap& cm, const StridedMap& xm, const StridedMap& ym, int elem_size,
                   cudaStream_t stream);
// full[i] = (cond[c(i)] != 0) == to_x ? gy[i] : 0.
void where_mask_f32(const unsigned char* cond, const float* gy, float* full, int64_t n, const StridedMap& cm,
                    bool to_x, cudaStream_t stream);

}  // inline namespace movement
}  // namespace d5::cuda
