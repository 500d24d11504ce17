#pragma once
// A device library that reaches "guardmem" (guarded_memory_device.h) as NCCL reaches a GPU: it
// reduces device memory through the memory's writable alias, with MPI as its wire. The host
// communicator beside it in a DeviceAwareCommunicator never sees that memory, and any host read
// of the PROT_NONE address, by d5 or by MPI, ends the rank with SIGSEGV; so a test with it shows
// which path each call took. It counts its calls. A mean it is given is the wire's: MPI's sum and
// the host's division, on the alias.
#include <memory>
#include <stdexcept>
#include <string>

#include "../guarded_memory_device.h"
#include "deep500/dist/device_collectives.h"

namespace d5::test {

class GuardedMemoryCollectives final : public DeviceCollectives {
 public:
  explicit GuardedMemoryCollectives(std::shared_ptr<Communicator> wire) : wire_(std::move(wire)) {}
  std::string name() const override { return "guardlib"; }
  bool reaches(Device d) const override { return d == guarded_memory_device(); }
  bool holds(const void* data) const override {
    if (data == nullptr) return false;
    try {
      guarded_memory().writable(data, 1);
      return true;
    } catch (const std::out_of_range&) {
      return false;
    }
  }
  void allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    ++calls;
    means += op == ReduceOp::mean;
    wire_->allreduce(alias(data, count, dtype), count, dtype, op);
  }
  CommRequestPtr iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    ++calls;
    means += op == ReduceOp::mean;
    return wire_->iallreduce(alias(data, count, dtype), count, dtype, op);
  }
  CommRequestPtr iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                  ReduceOp op) override {
    ++groups;
    means += op == ReduceOp::mean;
    std::vector<CommRequestPtr> requests;
    for (size_t i = 0; i < data.size(); ++i)
      requests.push_back(wire_->iallreduce(alias(data[i], counts[i], dtype), counts[i], dtype, op));
    return std::make_unique<CombinedRequest>(std::move(requests));
  }
  void broadcast(void* data, int64_t count, DType dtype, int root) override {
    ++calls;
    wire_->broadcast(alias(data, count, dtype), count, dtype, root);
  }
  CommRequestPtr ibroadcast(void* data, int64_t count, DType dtype, int root) override {
    ++calls;
    return wire_->ibroadcast(alias(data, count, dtype), count, dtype, root);
  }
  void divide(void* data, int64_t count, DType dtype, int ranks) override {
    ++divisions;
    divide_in_place(alias(data, count, dtype), count, dtype, ranks);
  }

  int calls = 0;
  int groups = 0;  // grouped calls, counted apart from `calls`
  int means = 0;   // calls given a mean, which the wire divides (on the writable alias)
  int divisions = 0;

 private:
  static void* alias(void* data, int64_t count, DType dtype) {
    return guarded_memory().writable(data, static_cast<size_t>(count) * dtype_size(dtype));
  }
  std::shared_ptr<Communicator> wire_;
};

}  // namespace d5::test
