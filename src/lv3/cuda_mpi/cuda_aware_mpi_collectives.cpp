// Device collectives through a CUDA-aware MPI (include/deep500/dist/cuda_aware_mpi.h).
//
// Ordering: MPI knows nothing of CUDA streams. d5's CUDA operators queue their work on the legacy
// default stream, so each call first waits for that stream (the kernels that produced its buffer)
// and only then hands the pointer to MPI. A mean is MPI's sum, then d5's division kernel, waited
// for before the call returns, so it rounds as the host's x / n.
//
// Nonblocking calls complete before they return: Open MPI reduces GPU buffers through its
// coll/cuda component, which stages them around the blocking reduction collectives, and d5 does
// not count on a library's nonblocking collectives taking GPU memory. The request is then already
// complete, and the overlap with backprop that NCCL gives is not there
// (docs/communicator.md#cuda-aware-mpi).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <array>

#include "../cuda/device_memory.h"
#include "../cuda/divide_kernels.h"
#include "../mpi_calls.h"
#include "deep500/core/error.h"
#include "deep500/dist/cuda_aware_mpi.h"

namespace d5 {

namespace {

void cuda_check(cudaError_t e, const char* call) {
  D5_CHECK(e == cudaSuccess, IoError, "CUDA-aware MPI communicator: {} failed: {}", call, cudaGetErrorString(e));
}

// A request for a call that completed before it returned.
class Completed final : public CommRequest {
 protected:
  void do_wait() override {}
  bool do_test() override { return true; }
};

class CudaAwareMpiCollectives final : public DeviceCollectives {
 public:
  CudaAwareMpiCollectives(int ordinal, int rank, int ranks) : ordinal_(ordinal), rank_(rank), ranks_(ranks) {}

  std::string name() const override { return "CUDA-aware MPI"; }
  bool reaches(Device d) const override { return d.kind == DeviceKind::cuda && d.index == ordinal_; }
  bool holds(const void* data) const override { return cuda_dist::holds_device_memory(data, ordinal_); }

  void allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    // The conversions may refuse, which must happen before this rank waits for the GPU or MPI.
    const MPI_Datatype type = mpi_calls::mpi_type(dtype);
    const int n = mpi_calls::mpi_count(count);
    const MPI_Op reduction = mpi_calls::mpi_op(op == ReduceOp::mean ? ReduceOp::sum : op);
    after_queued_work();
    mpi_calls::check(MPI_Allreduce(MPI_IN_PLACE, data, n, type, reduction, MPI_COMM_WORLD),
                     "MPI_Allreduce on GPU memory", rank_);
    if (op == ReduceOp::mean) divide(data, count, dtype, ranks_);
  }
  CommRequestPtr iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    allreduce(data, count, dtype, op);
    return std::make_unique<Completed>();
  }
  CommRequestPtr iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                  ReduceOp op) override {
    for (size_t i = 0; i < data.size(); ++i) allreduce(data[i], counts[i], dtype, op);
    return std::make_unique<Completed>();
  }
  void broadcast(void* data, int64_t count, DType dtype, int root) override {
    const MPI_Datatype type = mpi_calls::mpi_type(dtype);
    const int n = mpi_calls::mpi_count(count);
    after_queued_work();
    mpi_calls::check(MPI_Bcast(data, n, type, root, MPI_COMM_WORLD), "MPI_Bcast on GPU memory", rank_);
  }
  CommRequestPtr ibroadcast(void* data, int64_t count, DType dtype, int root) override {
    broadcast(data, count, dtype, root);
    return std::make_unique<Completed>();
  }
  void divide(void* data, int64_t count, DType dtype, int ranks) override {
    check_mean(ReduceOp::mean, dtype);
    cuda_check(cuda_dist::divide(data, count, dtype == DType::f64, ranks, cudaStreamLegacy), "the mean's division");
    after_queued_work();
  }

 private:
  // MPI reads the buffer from the host thread: the kernels queued before must have finished.
  static void after_queued_work() { cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize"); }

  int ordinal_;
  int rank_;
  int ranks_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> make_cuda_aware_mpi_collectives(Communicator& host) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  D5_CHECK(world == host.size(), InvalidArgument,
           "a CUDA-aware MPI communicator spans MPI_COMM_WORLD ({} ranks); its host communicator spans {}", world,
           host.size());
  const MpiCudaSupport support = mpi_cuda_support();
  int ordinal = 0;
  const bool gpu = !cuda_dist::current_gpu_uuid(&ordinal).empty();
  // Every rank learns every rank's answers, so that all refuse alike.
  const std::array<int32_t, 2> mine = {support.aware ? 1 : 0, gpu ? 1 : 0};
  std::vector<int32_t> all(2 * static_cast<size_t>(host.size()));
  host.allgather(mine.data(), 2, DType::i32, all.data());
  std::vector<int> aware, has_gpu;
  for (int r = 0; r < host.size(); ++r) {
    aware.push_back(all[2 * static_cast<size_t>(r)]);
    has_gpu.push_back(all[2 * static_cast<size_t>(r) + 1]);
  }
  const std::string reason = cuda_aware_mpi_reason(aware, has_gpu, support.says);
  D5_CHECK(reason.empty(), Unimplemented, "a CUDA-aware MPI cannot serve these ranks: {}", reason);
  return std::make_unique<CudaAwareMpiCollectives>(ordinal, host.rank(), host.size());
}

}  // namespace d5
