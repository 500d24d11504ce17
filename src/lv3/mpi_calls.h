#pragma once
// d5's types and errors in MPI's terms, for the communicators over MPI_COMM_WORLD (host memory:
// mpi_communicator.cpp; GPU memory through a CUDA-aware MPI: cuda_mpi/).
#include <mpi.h>

#include <cstdint>

#include "deep500/core/dtype.h"
#include "deep500/dist/communicator.h"

namespace d5::mpi_calls {

// f32, f64, i32, i64, u8; InvalidArgument for any other.
MPI_Datatype mpi_type(DType t);
// sum, max, min. A mean reaches MPI only as a sum (the caller divides): Internal.
MPI_Op mpi_op(ReduceOp op);
// MPI's int count; InvalidArgument naming the split when it does not fit.
int mpi_count(int64_t count);
// MPI_ERRORS_RETURN is set on the world communicator: a failed call returns here and becomes an
// IoError naming the call and this rank, instead of MPI aborting without saying which rank saw what.
void check(int rc, const char* call, int rank);

}  // namespace d5::mpi_calls
