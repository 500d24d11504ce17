#pragma once
// Level 3: a CUDA-aware MPI as the device library for GPU tensors
// (docs/communicator.md#cuda-aware-mpi).
//
// An MPI library built with CUDA support takes pointers to GPU memory in its calls. d5 asks the
// library whether it is (Open MPI: MPIX_Query_cuda_support(); MPICH: MPIX_GPU_query_support())
// and never assumes it: a library that cannot say is treated as not CUDA-aware. When every rank's
// library is and every rank has a GPU, make_cuda_aware_mpi_collectives() hands the allreduces and
// broadcasts of GPU memory to MPI as they are, through a DeviceAwareCommunicator, instead of
// staging them through host memory. Unlike NCCL, ranks may share a GPU.
#include <memory>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/dist/device_collectives.h"

namespace d5 {

struct MpiCudaSupport {
  bool aware = false;  // the library takes GPU buffers in this run
  std::string says;    // what the library said, e.g. "Open MPI: MPIX_Query_cuda_support() = 0"
};

// This process's MPI library's answer; MPI must be initialized (mpi_world()). A build without
// MPI answers "not aware", saying so.
MpiCudaSupport mpi_cuda_support();

// The device library over MPI_COMM_WORLD for this rank's current GPU; `host` is mpi_world().
// Collective. Throws NotBuilt without MPI or the CUDA backend, Unimplemented, alike on every
// rank, when a rank's MPI is not CUDA-aware or a rank has no CUDA device
// (cuda_aware_mpi_reason).
std::unique_ptr<DeviceCollectives> make_cuda_aware_mpi_collectives(Communicator& host);

// What keeps a CUDA-aware MPI from these ranks, "" when nothing does. aware[r] and has_gpu[r] are
// rank r's answers (0 or 1); `says` is this library's own answer, quoted when it is not aware.
std::string cuda_aware_mpi_reason(const std::vector<int>& aware, const std::vector<int>& has_gpu,
                                  const std::string& says);

}  // namespace d5
