#pragma once
// The built-in update rules as multi-tensor kernels (update_kernels.cu): one launch updates up to
// kUpdatesPerLaunch parameters, whatever their rules and sizes. Plain C++17 so that nvcc never
// sees d5's headers (fused_update_records.h is plain C++17 too).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "deep500/spi/fused_update_records.h"

namespace d5::cuda::kernels {

// Records per launch: they travel as the kernel's argument (under its 4 KiB).
inline constexpr int kUpdatesPerLaunch = 24;
// Elements one block updates.
inline constexpr int64_t kUpdateChunk = 4096;

// Queues every update on `stream`, in order, in ceil(count / kUpdatesPerLaunch) launches. Each
// rule's arithmetic rounds as the host's loop written out (no contractions into FMAs beyond the
// rule's own).
void fused_updates(const FusedUpdate* updates, size_t count, cudaStream_t stream);

// Chunks of kUpdateChunk elements of each tensor (at least one for an empty tensor).
int64_t norm_chunks(int64_t n);
// partials[k]: the sum of squares, in double, of chunk k of the tensors in order (each tensor's
// chunks after the previous tensor's; norm_chunks(sizes[i]) each), tree-summed in a fixed order.
void chunk_squared_sums(const float* const* tensors, const int64_t* sizes, size_t count, double* partials,
                        cudaStream_t stream);

}  // namespace d5::cuda::kernels
