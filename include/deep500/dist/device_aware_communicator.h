#pragma once
// Level 3: a communicator that reduces device memory where it lies (docs/communicator.md#device-collectives).
//
// Collectives on memory the device library holds (NCCL: this rank's GPU) go to it, with no copy
// through the host; everything else, host buffers and the calls the library lacks, to the host
// communicator (MPI). reaches() says yes for the library's device, so the Tensor calls, the
// gradient buckets and the overlapped allreduce hand its tensors over as they are, and host
// staging is left to the tensors of devices it does not reach. The volume counts both paths:
// each collective's device_calls and device_bytes are the library's share.
#include <memory>
#include <string>

#include "deep500/dist/communicator.h"
#include "deep500/dist/device_collectives.h"

namespace d5 {

class DeviceAwareCommunicator final : public Communicator {
 public:
  // `host` spans the same ranks in the same order as the library's communicator.
  DeviceAwareCommunicator(std::shared_ptr<Communicator> host, std::unique_ptr<DeviceCollectives> device);

  // "<library> + <host communicator>"
  std::string name() const override;
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  bool reaches(Device d) const override;

  Communicator& host() { return *host_; }
  DeviceCollectives& device() { return *device_; }

 protected:
  void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  CommRequestPtr do_iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  CommRequestPtr do_iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                     ReduceOp op) override;
  void do_broadcast(void* data, int64_t count, DType dtype, int root) override;
  CommRequestPtr do_ibroadcast(void* data, int64_t count, DType dtype, int root) override;
  void do_gatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>& counts,
                  int root) override;
  void do_allgatherv(const void* send, int64_t count, DType dtype, void* recv,
                     const std::vector<int64_t>& counts) override;
  void do_scatter(const void* send, int64_t count, DType dtype, void* recv, int root) override;
  void do_barrier() override;
  CommRequestPtr do_isend(const void* data, int64_t count, DType dtype, int peer, int tag) override;
  CommRequestPtr do_irecv(void* data, int64_t count, DType dtype, int peer, int tag) override;
  int do_recv_any(void* data, int64_t count, DType dtype, int tag) override;
  void do_divide(void* data, int64_t count, DType dtype, int ranks) override;
  bool carried_on_device(const void* data) const override;
  bool divides_means(const void* data) const override;

 private:
  // Refuses device memory in a call the library lacks: the caller must stage it (host_staging.h).
  void host_only(const void* data, const char* call) const;

  std::shared_ptr<Communicator> host_;
  std::unique_ptr<DeviceCollectives> device_;
};

}  // namespace d5
