// d5's types and errors in MPI's terms (mpi_calls.h).
#include "mpi_calls.h"

#include <limits>
#include <string>

#include "deep500/core/error.h"

namespace d5::mpi_calls {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
    default: D5_THROW(InvalidArgument, "the MPI communicator carries f32, f64, i32, i64 and u8, not {}", to_string(t));
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::mean: break;
  }
  D5_THROW(Internal, "mean reaches MPI only as a sum");
}

int mpi_count(int64_t count) {
  D5_CHECK_ARG(count <= std::numeric_limits<int>::max(), "{} elements exceed MPI's int count; split the buffer",
               count);
  return static_cast<int>(count);
}

void check(int rc, const char* call, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  D5_THROW(IoError, "rank {}: {} failed: {} (a peer may have exited; see its output)", rank, call,
           std::string(text, static_cast<size_t>(len)));
}

}  // namespace d5::mpi_calls
