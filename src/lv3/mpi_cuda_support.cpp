// Whether this process's MPI takes GPU buffers (include/deep500/dist/cuda_aware_mpi.h).
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions (MPIX_Query_cuda_support); MPICH declares its own in mpi.h
#endif

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/dist/cuda_aware_mpi.h"

namespace d5 {

MpiCudaSupport mpi_cuda_support() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  D5_CHECK(initialized != 0, Internal, "mpi_cuda_support() asks MPI, which mpi_world() initializes first");
  MpiCudaSupport s;
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  // The build-time macro says how the library was configured, the call whether this run can use
  // GPU buffers (e.g. the CUDA driver was found); both must say yes.
  const int runtime = MPIX_Query_cuda_support();
  s.aware = MPIX_CUDA_AWARE_SUPPORT && runtime == 1;
  s.says = fmt::format("Open MPI: built {}, MPIX_Query_cuda_support() = {}",
                       MPIX_CUDA_AWARE_SUPPORT ? "with CUDA support" : "without CUDA support", runtime);
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  const int rc = MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported);
  s.aware = rc == MPI_SUCCESS && supported == 1;
  s.says = fmt::format("MPICH: MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) = {}", rc == MPI_SUCCESS ? supported : -1);
#else
  s.says = "this MPI library has no query for CUDA support (neither Open MPI's MPIX_Query_cuda_support nor "
           "MPICH's MPIX_GPU_query_support), so d5 does not hand it GPU memory";
#endif
  return s;
}

}  // namespace d5
