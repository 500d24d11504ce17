// A CUDA-aware MPI's preconditions as cuda_aware_mpi_reason states them
// (include/deep500/dist/cuda_aware_mpi.h).
#include <gtest/gtest.h>

#include "deep500/dist/cuda_aware_mpi.h"

namespace d5 {
namespace {

TEST(CudaAwareMpiReason, AwareRanksWithGpusPassEvenSharingOne) {
  EXPECT_EQ(cuda_aware_mpi_reason({1}, {1}, "yes"), "");
  EXPECT_EQ(cuda_aware_mpi_reason({1, 1, 1}, {1, 1, 1}, "yes"), "");
}

TEST(CudaAwareMpiReason, EachMissingPieceNamesItsRanks) {
  EXPECT_EQ(cuda_aware_mpi_reason({0, 0}, {1, 1}, "Open MPI: built without CUDA support, MPIX_Query_cuda_support() = 0"),
            "the MPI library is not CUDA-aware on rank(s) 0, 1 (Open MPI: built without CUDA support, "
            "MPIX_Query_cuda_support() = 0)");
  EXPECT_EQ(cuda_aware_mpi_reason({1, 1, 1}, {1, 0, 0}, "yes"), "no CUDA device on rank(s) 1, 2");
  EXPECT_EQ(cuda_aware_mpi_reason({1, 0}, {0, 1}, "no query"),
            "the MPI library is not CUDA-aware on rank(s) 1 (no query); no CUDA device on rank(s) 0");
}

}  // namespace
}  // namespace d5
