#pragma once
// What the device libraries of Level 3 (NCCL, a CUDA-aware MPI) ask of the CUDA runtime about
// this rank's GPU and the memory they are handed.
#include <string>

namespace d5::cuda_dist {

// Whether `data` points into device (or managed) memory of GPU `ordinal`; a host pointer, or one
// the runtime does not know, is not.
bool holds_device_memory(const void* data, int ordinal);

// This rank's current GPU as nvidia-smi names it: "GPU-" and its 16 UUID bytes in hex, grouped
// 8-4-4-4-12 (e.g. "GPU-5a3c0f2e-1b7d-4c9a-8e6f-0123456789ab"), its ordinal in *ordinal; "" on a
// rank without a CUDA device.
std::string current_gpu_uuid(int* ordinal);

}  // namespace d5::cuda_dist
