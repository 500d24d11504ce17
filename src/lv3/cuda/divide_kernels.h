#pragma once
// The mean's division on the GPU (plain C++17 for nvcc): a mean through NCCL or a CUDA-aware MPI.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace d5::cuda_dist {

// data[i] /= ranks for `count` floats (f64 when `f64`), queued on `stream`. IEEE division, as the
// host's: nvcc divides exactly unless told -prec-div=false.
cudaError_t divide(void* data, int64_t count, bool f64, int ranks, cudaStream_t stream);

}  // namespace d5::cuda_dist
