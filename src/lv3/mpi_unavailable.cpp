// mpi_world() in a build without MPI (include/deep500/dist/mpi_world.h).
#include "deep500/core/error.h"
#include "deep500/dist/cuda_aware_mpi.h"
#include "deep500/dist/mpi_world.h"

namespace d5 {

bool mpi_built() { return false; }
bool launched_by_mpi_launcher() { return false; }

bool mpi_world_is_distributed() { return false; }
void abort_world(int /*code*/) {}
void set_mpi_watchdog_timeout(double /*seconds*/) {}
double mpi_watchdog_timeout() { return 0; }

std::shared_ptr<Communicator> mpi_world() {
  D5_THROW(NotBuilt, "this d5 was built without MPI; install libopenmpi-dev and openmpi-bin (or MPICH) and "
           "rebuild with -DD5_WITH_MPI=ON");
}

MpiCudaSupport mpi_cuda_support() { return {false, "this d5 was built without MPI"}; }

}  // namespace d5
