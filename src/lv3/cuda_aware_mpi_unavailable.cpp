// A build without MPI or without the CUDA backend (include/deep500/dist/cuda_aware_mpi.h): GPU
// tensors are staged through the host.
#include "deep500/core/error.h"
#include "deep500/dist/cuda_aware_mpi.h"

namespace d5 {

// Built only where MPI or the CUDA backend is missing: with the CUDA backend (D5_HAVE_CUDA, from
// d5_core), MPI is what is missing.
std::unique_ptr<DeviceCollectives> make_cuda_aware_mpi_collectives(Communicator&) {
#ifdef D5_HAVE_CUDA
  constexpr const char* missing = "MPI";
#else
  constexpr const char* missing = "the CUDA backend";
#endif
  D5_THROW(NotBuilt, "this d5 was built without {}: a CUDA-aware MPI needs both MPI and the CUDA backend", missing);
}

}  // namespace d5
