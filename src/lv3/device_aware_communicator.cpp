// A communicator that reduces device memory where it lies
// (include/deep500/dist/device_aware_communicator.h).
#include "deep500/dist/device_aware_communicator.h"

#include "deep500/core/error.h"

namespace d5 {

DeviceAwareCommunicator::DeviceAwareCommunicator(std::shared_ptr<Communicator> host,
                                                 std::unique_ptr<DeviceCollectives> device)
    : Communicator(host ? host->size() : 1), host_(std::move(host)), device_(std::move(device)) {
  D5_CHECK(host_ != nullptr && device_ != nullptr, InvalidArgument,
           "a device-aware communicator needs a host communicator and a device library");
}

std::string DeviceAwareCommunicator::name() const { return device_->name() + " + " + host_->name(); }

bool DeviceAwareCommunicator::reaches(Device d) const { return device_->reaches(d) || host_->reaches(d); }

bool DeviceAwareCommunicator::carried_on_device(const void* data) const { return device_->holds(data); }

bool DeviceAwareCommunicator::divides_means(const void* data) const { return device_->holds(data); }

void DeviceAwareCommunicator::host_only(const void* data, const char* call) const {
  D5_CHECK(!device_->holds(data), Unimplemented,
           "{} has no {} path for device memory: stage the tensor through host memory (host_staging.h)", call,
           device_->name());
}

void DeviceAwareCommunicator::do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  if (device_->holds(data)) return device_->allreduce(data, count, dtype, op);
  host_->allreduce(data, count, dtype, op);
}

CommRequestPtr DeviceAwareCommunicator::do_iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  if (device_->holds(data)) return device_->iallreduce(data, count, dtype, op);
  return host_->iallreduce(data, count, dtype, op);
}

CommRequestPtr DeviceAwareCommunicator::do_iallreduce_group(std::span<void* const> data,
                                                            std::span<const int64_t> counts, DType dtype,
                                                            ReduceOp op) {
  // Every rank splits alike: the same gradients lie on the device everywhere.
  std::vector<void*> on_device, on_host;
  std::vector<int64_t> device_counts, host_counts;
  for (size_t i = 0; i < data.size(); ++i) {
    const bool held = device_->holds(data[i]);
    (held ? on_device : on_host).push_back(data[i]);
    (held ? device_counts : host_counts).push_back(counts[i]);
  }
  std::vector<CommRequestPtr> requests;
  if (!on_device.empty()) requests.push_back(device_->iallreduce_group(on_device, device_counts, dtype, op));
  if (!on_host.empty()) requests.push_back(host_->iallreduce_group(on_host, host_counts, dtype, op));
  if (requests.size() == 1) return std::move(requests.front());
  return std::make_unique<CombinedRequest>(std::move(requests));
}

void DeviceAwareCommunicator::do_broadcast(void* data, int64_t count, DType dtype, int root) {
  if (device_->holds(data)) return device_->broadcast(data, count, dtype, root);
  host_->broadcast(data, count, dtype, root);
}

CommRequestPtr DeviceAwareCommunicator::do_ibroadcast(void* data, int64_t count, DType dtype, int root) {
  if (device_->holds(data)) return device_->ibroadcast(data, count, dtype, root);
  return host_->ibroadcast(data, count, dtype, root);
}

void DeviceAwareCommunicator::do_divide(void* data, int64_t count, DType dtype, int ranks) {
  if (device_->holds(data)) return device_->divide(data, count, dtype, ranks);
  divide_in_place(data, count, dtype, ranks);
}

void DeviceAwareCommunicator::do_gatherv(const void* send, int64_t count, DType dtype, void* recv,
                                         const std::vector<int64_t>& counts, int root) {
  host_only(send, "gather");
  host_only(recv, "gather");
  host_->gatherv(send, count, dtype, recv, counts, root);
}

void DeviceAwareCommunicator::do_allgatherv(const void* send, int64_t count, DType dtype, void* recv,
                                            const std::vector<int64_t>& counts) {
  host_only(send, "allgather");
  host_only(recv, "allgather");
  host_->allgatherv(send, count, dtype, recv, counts);
}

void DeviceAwareCommunicator::do_scatter(const void* send, int64_t count, DType dtype, void* recv, int root) {
  host_only(send, "scatter");
  host_only(recv, "scatter");
  host_->scatter(send, count, dtype, recv, root);
}

void DeviceAwareCommunicator::do_barrier() { host_->barrier(); }

CommRequestPtr DeviceAwareCommunicator::do_isend(const void* data, int64_t count, DType dtype, int peer, int tag) {
  host_only(data, "send");
  return host_->isend(data, count, dtype, peer, tag);
}

CommRequestPtr DeviceAwareCommunicator::do_irecv(void* data, int64_t count, DType dtype, int peer, int tag) {
  host_only(data, "recv");
  return host_->irecv(data, count, dtype, peer, tag);
}

int DeviceAwareCommunicator::do_recv_any(void* data, int64_t count, DType dtype, int tag) {
  host_only(data, "recv_any");
  return host_->recv_any(data, count, dtype, tag);
}

}  // namespace d5
