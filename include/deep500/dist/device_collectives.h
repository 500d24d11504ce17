#pragma once
// Level 3: collectives of a library that reduces device memory where it lies, as NCCL reduces GPU
// memory (docs/communicator.md#device-collectives).
//
// A DeviceAwareCommunicator (device_aware_communicator.h) hands such a library the collectives
// it has on memory it holds and everything else to a host communicator (MPI). The libraries (NCCL,
// a CUDA-aware MPI) have allreduce and broadcast in place here; gathers, scatters and messages go
// through the host.
#include <cstdint>
#include <span>
#include <string>

#include "deep500/core/device.h"
#include "deep500/core/dtype.h"
#include "deep500/dist/communicator.h"

namespace d5 {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // The library and its version, e.g. "NCCL 2.27.7".
  virtual std::string name() const = 0;
  // Whether tensors of device d are memory this library reduces (its rank's GPU).
  virtual bool reaches(Device d) const = 0;
  // Whether `data` points into such memory.
  virtual bool holds(const void* data) const = 0;

  // As Communicator's, on memory the library holds; op is sum, max, min or mean, whose sum is
  // divided by the ranks on the device in the library's order (x / n, as the host rounds it)
  // before the call completes. A nonblocking call is ordered after the work already queued on
  // the device; its request completes when the library's work has. NCCL's return at once; a
  // CUDA-aware MPI's complete before they return (cuda_aware_mpi.h).
  virtual void allreduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  virtual CommRequestPtr iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // Several buffers as one operation (NCCL: one group of calls, launched together), no copies.
  virtual CommRequestPtr iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                          ReduceOp op) = 0;
  virtual void broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual CommRequestPtr ibroadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // data[i] /= ranks on the device (f32, f64), rounded as the host's division rounds: the mean
  // of a group that also holds host buffers, which the communicator divides itself.
  virtual void divide(void* data, int64_t count, DType dtype, int ranks) = 0;
};

}  // namespace d5
