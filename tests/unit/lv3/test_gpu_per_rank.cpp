// NCCL's precondition, one GPU per rank, as gpu_per_rank_reason states it (include/deep500/dist/nccl.h).
#include <gtest/gtest.h>

#include "deep500/dist/nccl.h"

namespace d5 {
namespace {

TEST(GpuPerRank, RanksWithGpusOfTheirOwnPass) {
  EXPECT_EQ(gpu_per_rank_reason({"GPU-a"}), "");
  EXPECT_EQ(gpu_per_rank_reason({"GPU-a", "GPU-b", "GPU-c"}), "");
}

TEST(GpuPerRank, RanksSharingAGpuAreNamedWithIt) {
  EXPECT_EQ(gpu_per_rank_reason({"GPU-a", "GPU-b", "GPU-a", "GPU-b", "GPU-c"}),
            "ranks 0, 2 share GPU GPU-a; ranks 1, 3 share GPU GPU-b; NCCL needs one GPU per rank (give each rank its "
            "own, e.g. one rank per GPU of the node)");
}

TEST(GpuPerRank, RanksWithoutAGpuAreNamedFirst) {
  EXPECT_EQ(gpu_per_rank_reason({"GPU-a", "", "GPU-a", ""}), "no CUDA device on rank(s) 1, 3");
}

}  // namespace
}  // namespace d5
