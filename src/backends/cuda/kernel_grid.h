#pragma once
// Launch shapes shared by the backend's kernels (*.cu): a block size, and the blocks of a
// grid-stride loop, capped because the loop covers whatever a capped grid leaves.
#include <cstdint>

namespace d5::cuda::grid {

inline constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int64_t per_block = kThreads) {
  const int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

}  // namespace d5::cuda::grid
