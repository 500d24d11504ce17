#pragma once
// Host-side helpers of the CUDA movement, reduction, normalization and loss operators: index
// maps for the kernels (rank at most kMaxRank), constant integer inputs read at creation,
// summing gradients back to a broadcast shape, and the device flag that reports the first bad
// index of an input whose values only arrive at run time.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda_common.h"
#include "reduce_kernels.h"

namespace d5::cuda {
// Own helpers get their own (inline) namespace so that they cannot clash at link time with
// other families' helpers of the same name.
inline namespace movement {

// Row-major strides of dims, in elements.
std::vector<int64_t> row_strides(const std::vector<int64_t>& dims);
// A map over `dims` reading at base + coords . strides; refuses ranks above kMaxRank.
StridedMap strided_map(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t base = 0);
// Reads a tensor of shape `in` at every position of `out`, to which it broadcasts (numpy rules).
StridedMap broadcast_map(const Shape& in, const Shape& out);

// The int32/int64 values of input i (which must be known at creation, else Refused), or of
// attribute `attr` when the spec has no input i, or nullopt when neither is given.
std::optional<std::vector<int64_t>> ints_input_or_attr(const OpSpec& s, size_t i, const std::string& attr);
// axis in [-rank, rank) as an index; the oracle has already rejected others.
size_t axis_index(int64_t axis, size_t rank);

// Copies host integers to a new device buffer (a blocking copy: used at creation only).
DeviceBuffer upload(const std::vector<int64_t>& v);

// Reduction of a tensor of `in_dims` over the axes marked in `reduced`; outputs are numbered
// in row-major order of the kept axes.
struct Reduction {
  ReducePlan plan;
  int64_t outputs = 0, group = 0;
};
Reduction reduction_over(const std::vector<int64_t>& in_dims, const std::vector<bool>& reduced);
// Summing a tensor of shape `full` back to `target`, which broadcasts to it (numpy rules).
Reduction fold_to(const Shape& full, const Shape& target);
// Runs a Sum reduction (a fold) on the operators' stream.
void run_sum(const float* x, float* y, const Reduction& r);

// The first bad position a kernel reports through atomicMin on a device word preset to all ones.
class FirstBad {
 public:
  FirstBad() : buf_(sizeof(unsigned long long)) {}
  // Presets the word (on the stream) and returns it for the kernel.
  unsigned long long* reset();
  // Waits for the stream and returns the position, if any.
  std::optional<int64_t> read() const;

 private:
  DeviceBuffer buf_;
};
// Element `pos` of a device int64 (is64) or int32 array, read back for an error message.
int64_t read_index(const void* device_ints, bool is64, int64_t pos);

// The families registered by register_movement_ops (movement_ops.cpp).
void register_block_ops(OpRegistry& r);       // Concat, Split, Gather, Where (block_ops.cpp)
void register_reduce_ops(OpRegistry& r);      // reduce_ops.cpp
void register_layer_norm_op(OpRegistry& r);   // layer_norm.cpp
void register_loss_ops(OpRegistry& r);        // loss_ops.cpp
}  // inline namespace movement
}  // namespace d5::cuda
