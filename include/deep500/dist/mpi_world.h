#pragma once
// Level 3: the MPI world (docs/communicator.md).
//
// This header does not include mpi.h: code that only needs "the communicator of this run" builds
// the same with and without MPI. Without MPI, mpi_world() throws Unimplemented naming the
// package to install.
#include <memory>

#include "deep500/dist/communicator.h"

namespace d5 {

// True when this deep500 was built with MPI (D5_WITH_MPI).
bool mpi_built();
// True when the process was started by mpirun / mpiexec / srun (their environment variables),
// even with one rank: then d5 initializes MPI so that every rank takes part.
bool launched_by_mpi_launcher();
// MPI_COMM_WORLD as a Communicator. The first call initializes MPI and sets MPI_ERRORS_RETURN, so
// a failed call is a d5::IoError naming the operation and the peer; MPI is finalized at exit. The
// communicator is shared: every caller sees the same volume(). On more than one rank it also
// starts the watchdog (docs/distributed.md#faults), which needs MPI_THREAD_MULTIPLE.
std::shared_ptr<Communicator> mpi_world();
// The watchdog ends the run, naming the rank, when a rank's ring neighbour has heard nothing from
// it for this many seconds (0: no watchdog). Default: $D5_WATCHDOG_TIMEOUT, else 20 s. Must be
// called before the first mpi_world(), with the same value on every rank.
void set_mpi_watchdog_timeout(double seconds);
// The running watchdog's timeout in seconds; 0 when there is none.
double mpi_watchdog_timeout();
// True once mpi_world() initialized MPI with more than one rank.
bool mpi_world_is_distributed();
// Ends every rank of the run with `code` (MPI_Abort): for an error on one rank, whose peers would
// otherwise wait forever in their next collective. Returns only when no distributed world exists.
void abort_world(int code);

}  // namespace d5
