// Device collectives over NCCL (include/deep500/dist/nccl.h).
//
// Ordering: d5's CUDA operators queue their work on the legacy default stream. NCCL's calls run
// on a stream of their own, created non-blocking so that a collective may overlap the backprop
// kernels queued after it; an event recorded on the default stream before each call makes the
// collective wait for the kernels that produced its buffer. A blocking call waits for its stream,
// a nonblocking one for an event recorded after it.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "deep500/core/error.h"
#include "deep500/dist/nccl.h"
#include "../cuda/device_memory.h"
#include "../cuda/divide_kernels.h"

namespace d5 {

namespace {

void nccl_check(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  D5_THROW(IoError, "NCCL: {} failed: {}{}{}", call, ncclGetErrorString(r), last != nullptr && *last ? ": " : "",
           last != nullptr ? last : "");
}

void cuda_check(cudaError_t e, const char* call) {
  D5_CHECK(e == cudaSuccess, IoError, "NCCL communicator: {} failed: {}", call, cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
    default: D5_THROW(InvalidArgument, "NCCL communicates f32, f64, i32, i64 or u8, not {}", to_string(t));
  }
}

// A mean is NCCL's sum, then d5's division on the same stream (ncclAvg would round otherwise).
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  D5_THROW(Internal, "unknown reduction");
}

// Completes when the event recorded after the collective has; dropped unwaited, it waits.
class NcclRequest final : public CommRequest {
 public:
  explicit NcclRequest(cudaEvent_t done) : done_(done) {}
  ~NcclRequest() override {
    if (!finished_) cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }

 protected:
  void do_wait() override {
    cuda_check(cudaEventSynchronize(done_), "cudaEventSynchronize");
    finished_ = true;
  }
  bool do_test() override {
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return false;
    cuda_check(e, "cudaEventQuery");
    finished_ = true;
    return true;
  }

 private:
  cudaEvent_t done_;
  bool finished_ = false;
};

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(ncclComm_t comm, int ordinal) : comm_(comm), ordinal_(ordinal) {
    nccl_check(ncclCommCount(comm_, &ranks_), "ncclCommCount", comm_);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    int version = 0;
    nccl_check(ncclGetVersion(&version), "ncclGetVersion");
    name_ = fmt::format("NCCL {}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  }
  ~NcclCollectives() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  bool reaches(Device d) const override { return d.kind == DeviceKind::cuda && d.index == ordinal_; }
  bool holds(const void* data) const override { return cuda_dist::holds_device_memory(data, ordinal_); }

  void allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    enqueue_allreduce(data, count, dtype, op);
    finish();
  }
  CommRequestPtr iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    enqueue_allreduce(data, count, dtype, op);
    return completion();
  }
  CommRequestPtr iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                  ReduceOp op) override {
    // Both may refuse, which must happen before the group is opened.
    const ncclDataType_t type = nccl_type(dtype);
    const ncclRedOp_t reduction = nccl_op(op);
    after_queued_work();
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < data.size(); ++i) {
      const ncclResult_t r =
          ncclAllReduce(data[i], data[i], static_cast<size_t>(counts[i]), type, reduction, comm_, stream_);
      if (r != ncclSuccess) {
        ncclGroupEnd();
        nccl_check(r, "ncclAllReduce (grouped)", comm_);
      }
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd", comm_);
    if (op == ReduceOp::mean) {
      for (size_t i = 0; i < data.size(); ++i) enqueue_division(data[i], counts[i], dtype);
    }
    return completion();
  }
  void broadcast(void* data, int64_t count, DType dtype, int root) override {
    enqueue_broadcast(data, count, dtype, root);
    finish();
  }
  CommRequestPtr ibroadcast(void* data, int64_t count, DType dtype, int root) override {
    enqueue_broadcast(data, count, dtype, root);
    return completion();
  }
  void divide(void* data, int64_t count, DType dtype, int ranks) override {
    check_mean(ReduceOp::mean, dtype);
    after_queued_work();
    cuda_check(cuda_dist::divide(data, count, dtype == DType::f64, ranks, stream_), "the mean's division");
    finish();
  }

 private:
  // The collective's stream waits for the work queued so far on the default stream.
  void after_queued_work() {
    cuda_check(cudaEventRecord(ready_, cudaStreamLegacy), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  }
  void enqueue_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
    after_queued_work();
    nccl_check(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm_, stream_),
               "ncclAllReduce", comm_);
    if (op == ReduceOp::mean) enqueue_division(data, count, dtype);
  }
  // The mean's division after the sum on the collective's stream: done when the call is.
  void enqueue_division(void* data, int64_t count, DType dtype) {
    cuda_check(cuda_dist::divide(data, count, dtype == DType::f64, ranks_, stream_), "the mean's division");
  }
  void enqueue_broadcast(void* data, int64_t count, DType dtype, int root) {
    after_queued_work();
    nccl_check(ncclBroadcast(data, data, static_cast<size_t>(count), nccl_type(dtype), root, comm_, stream_),
               "ncclBroadcast", comm_);
  }
  void finish() { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  CommRequestPtr completion() {
    cudaEvent_t done = nullptr;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    const cudaError_t e = cudaEventRecord(done, stream_);
    if (e != cudaSuccess) cudaEventDestroy(done);
    cuda_check(e, "cudaEventRecord");
    return std::make_unique<NcclRequest>(done);
  }

  ncclComm_t comm_;
  int ordinal_;
  int ranks_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::string name_;
};

}  // namespace

std::string nccl_build_version() { return fmt::format("{}.{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH); }

std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator& host) {
  // Every rank learns every rank's GPU first, so that all refuse alike instead of some waiting
  // in NCCL for ranks that gave up.
  int ordinal = 0;
  constexpr int64_t kIdBytes = 48;
  std::array<char, kIdBytes> mine{};
  const std::string uuid = cuda_dist::current_gpu_uuid(&ordinal);
  std::memcpy(mine.data(), uuid.data(), std::min<size_t>(uuid.size(), kIdBytes - 1));
  std::vector<char> all(static_cast<size_t>(kIdBytes * host.size()));
  host.allgather(mine.data(), kIdBytes, DType::u8, all.data());
  std::vector<std::string> ids;
  for (int r = 0; r < host.size(); ++r) ids.emplace_back(all.data() + static_cast<ptrdiff_t>(r) * kIdBytes);
  const std::string reason = gpu_per_rank_reason(ids);
  D5_CHECK(reason.empty(), Unimplemented, "NCCL cannot serve these ranks: {}", reason);

  // Rank 0's unique id, with whether it could make one, so that no rank waits on a failed peer.
  struct Bootstrap {
    int32_t ok = 0;
    ncclUniqueId id{};
  } boot;
  std::string failure;
  if (host.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&boot.id);
    boot.ok = r == ncclSuccess ? 1 : 0;
    if (r != ncclSuccess) failure = ncclGetErrorString(r);
  }
  host.broadcast(&boot, static_cast<int64_t>(sizeof boot), DType::u8, 0);
  D5_CHECK(boot.ok == 1, IoError, "NCCL: ncclGetUniqueId failed on rank 0{}{}", failure.empty() ? "" : ": ", failure);
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, host.size(), boot.id, host.rank()), "ncclCommInitRank");
  try {
    return std::make_unique<NcclCollectives>(comm, ordinal);
  } catch (...) {
    ncclCommDestroy(comm);
    throw;
  }
}

}  // namespace d5
