#pragma once
// One GPU per rank on a node with several (docs/gpu.md#several-gpus-in-a-node).
//
// d5's CUDA operators run on cuda:0 of what the process sees. N ranks an MPI launcher starts on a
// node with G GPUs would all see the same first GPU; binding gives local rank r the GPU r mod G by
// narrowing CUDA_VISIBLE_DEVICES before the CUDA runtime starts, so cuda:0 is that GPU. With one
// GPU, or more ranks than GPUs, ranks share GPUs, which the distributed schemes' host staging
// allows. D5_GPU_BINDING=off leaves the environment alone.
#include <optional>
#include <string>

namespace d5 {

struct GpuBindingInput {
  std::optional<int> local_rank;           // from the launcher's environment; none outside one
  std::optional<std::string> visible;      // CUDA_VISIBLE_DEVICES as set, if set
  int gpu_count = 0;                       // GPUs the driver has (used when `visible` is unset)
  std::string mode = "local-rank";         // D5_GPU_BINDING: "local-rank" (default) or "off"
};

// The CUDA_VISIBLE_DEVICES this process should run with, or none to leave the environment as it
// is: a set list of several entries gives local rank r its (r mod n)-th entry; unset, the driver's
// G > 1 GPUs give it "r mod G". InvalidArgument for a mode other than the two.
std::optional<std::string> visible_gpu_for_local_rank(const GpuBindingInput& in);

// Reads the launcher's local rank (Open MPI, MPICH/Hydra and Intel MPI, Slurm), CUDA_VISIBLE_DEVICES,
// D5_GPU_BINDING and the driver's GPU count (/proc/driver/nvidia/gpus), and sets
// CUDA_VISIBLE_DEVICES accordingly. Must run before anything starts the CUDA runtime (d5's main
// calls it first). Returns what it did, "" when nothing; gpu_binding() keeps it for the manifest.
std::string bind_gpu_to_local_rank();
const std::string& gpu_binding();

}  // namespace d5
