#pragma once
// A new communication scheme plugged into deep500: allreduce as a ring (reduce-scatter, then
// allgather; Patarasuk & Yuan 2009, the scheme of Baidu's ring allreduce) written on point-to-point
// messages. Everything else is forwarded to the transport communicator (MPI's world).
//
// The wrapper's own volume() counts the collectives as any Communicator does; the transport's
// volume() counts the ring's messages per peer: 2 (n - 1) chunks of about count / n elements to
// the right-hand neighbour. Any distributed optimizer takes it in place of the world:
//
//   auto ring = std::make_shared<RingAllreduceCommunicator>(d5::mpi_world());
//   auto dsgd = d5::make_distributed_optimizer(options, d5::make_optimizer("sgd"), ring);
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/core/error.h"

class RingAllreduceCommunicator : public d5::Communicator {
 public:
  explicit RingAllreduceCommunicator(std::shared_ptr<d5::Communicator> transport)
      : Communicator(transport->size()), t_(std::move(transport)) {}
  std::string name() const override { return "ring(" + t_->name() + ")"; }
  int rank() const override { return t_->rank(); }
  int size() const override { return t_->size(); }
  d5::Communicator& transport() { return *t_; }

 protected:
  void do_allreduce(void* data, int64_t count, d5::DType dtype, d5::ReduceOp op) override {
    // A mean arrives here as a sum: the Communicator divides afterwards.
    if (dtype == d5::DType::f32) return ring<float>(static_cast<float*>(data), count, op);
    if (dtype == d5::DType::f64) return ring<double>(static_cast<double*>(data), count, op);
    D5_THROW(InvalidArgument, "the example ring allreduce reduces f32 or f64, not {}", d5::to_string(dtype));
  }
  // Blocking underneath: the request is complete when returned.
  d5::CommRequestPtr do_iallreduce(void* data, int64_t count, d5::DType dtype, d5::ReduceOp op) override {
    do_allreduce(data, count, dtype, op);
    return std::make_unique<Done>();
  }
  void do_broadcast(void* data, int64_t count, d5::DType dtype, int root) override {
    t_->broadcast(data, count, dtype, root);
  }
  d5::CommRequestPtr do_ibroadcast(void* data, int64_t count, d5::DType dtype, int root) override {
    return t_->ibroadcast(data, count, dtype, root);
  }
  void do_gatherv(const void* send, int64_t count, d5::DType dtype, void* recv, const std::vector<int64_t>& counts,
                  int root) override {
    t_->gatherv(send, count, dtype, recv, counts, root);
  }
  void do_allgatherv(const void* send, int64_t count, d5::DType dtype, void* recv,
                     const std::vector<int64_t>& counts) override {
    t_->allgatherv(send, count, dtype, recv, counts);
  }
  void do_scatter(const void* send, int64_t count, d5::DType dtype, void* recv, int root) override {
    t_->scatter(send, count, dtype, recv, root);
  }
  void do_barrier() override { t_->barrier(); }
  d5::CommRequestPtr do_isend(const void* data, int64_t count, d5::DType dtype, int peer, int tag) override {
    return t_->isend(data, count, dtype, peer, tag);
  }
  d5::CommRequestPtr do_irecv(void* data, int64_t count, d5::DType dtype, int peer, int tag) override {
    return t_->irecv(data, count, dtype, peer, tag);
  }
  int do_recv_any(void* data, int64_t count, d5::DType dtype, int tag) override {
    return t_->recv_any(data, count, dtype, tag);
  }

 private:
  struct Done : d5::CommRequest {
    void do_wait() override {}
  };

  // Chunk i of n: count / n elements, the first count % n chunks one more.
  static int64_t chunk_begin(int64_t count, int n, int i) {
    return i * (count / n) + std::min<int64_t>(i, count % n);
  }

  // Combines a received chunk into ours; any associative, commutative op works on a ring.
  template <typename T>
  static void combine(T* into, const T* from, int64_t n, d5::ReduceOp op) {
    switch (op) {
      case d5::ReduceOp::max:
        for (int64_t i = 0; i < n; ++i) into[i] = std::max(into[i], from[i]);
        return;
      case d5::ReduceOp::min:
        for (int64_t i = 0; i < n; ++i) into[i] = std::min(into[i], from[i]);
        return;
      case d5::ReduceOp::sum:
      case d5::ReduceOp::mean:
        for (int64_t i = 0; i < n; ++i) into[i] += from[i];
        return;
    }
  }

  template <typename T>
  void ring(T* data, int64_t count, d5::ReduceOp op) {
    const int n = size(), r = rank();
    if (n == 1) return;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto begin = [&](int i) { return chunk_begin(count, n, ((i % n) + n) % n); };
    auto length = [&](int i) { return chunk_begin(count, n, ((i % n) + n) % n + 1) - begin(i); };
    std::vector<T> incoming(static_cast<size_t>(count / n + 1));
    // Reduce-scatter: after n - 1 steps rank r holds the reduction of chunk r + 1.
    for (int s = 0; s < n - 1; ++s) {
      const int send = r - s, recv = r - s - 1;
      t_->sendrecv(data + begin(send), length(send), right, incoming.data(), length(recv), left,
                   d5::dtype_of_v<T>, kTag);
      combine(data + begin(recv), incoming.data(), length(recv), op);
    }
    // Allgather: pass the reduced chunks around the ring.
    for (int s = 0; s < n - 1; ++s) {
      const int send = r + 1 - s, recv = r - s;
      t_->sendrecv(data + begin(send), length(send), right, data + begin(recv), length(recv), left,
                   d5::dtype_of_v<T>, kTag);
    }
  }

  static constexpr int kTag = 0x7219;
  std::shared_ptr<d5::Communicator> t_;
};
