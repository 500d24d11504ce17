#pragma once
// Level 3: the communicator (docs/communicator.md).
//
// Collectives and point-to-point messages between the ranks of a distributed run. The public
// calls are not virtual: they check arguments, time the call and record it in volume(), then
// hand the work to the implementation's do_* hooks. A new communication scheme (say, a ring
// allreduce written on send/recv, examples/ring_allreduce) derives from an implementation and
// overrides one hook; the accounting stays the same for every scheme.
//
// Buffers are raw memory of `count` elements of `dtype` (f32, f64, i32, i64, u8); the Tensor
// overloads take a tensor's data. Calls are collective where MPI's are: every rank makes them
// in the same order with matching counts.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/dist/communication_volume.h"
#include "deep500/core/dtype.h"
#include "deep500/core/tensor.h"

namespace d5 {

enum class ReduceOp { sum, mean, max, min };

// A nonblocking operation in flight. wait() completes it (and for a mean, divides); a request
// destroyed without wait() waits in its destructor, so buffers are never left in use.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  void wait();
  // Advances the operation (MPI progresses nonblocking collectives only inside its calls) and
  // says whether it completed; a completed request needs no wait().
  bool test();
  bool done() const { return done_; }

 protected:
  virtual void do_wait() = 0;
  virtual bool do_test() { return false; }
  void attach(CommunicationVolume* volume) { volume_ = volume; }
  friend class Communicator;

 private:
  CommunicationVolume* volume_ = nullptr;
  bool done_ = false;
};
using CommRequestPtr = std::unique_ptr<CommRequest>;
void wait_all(std::vector<CommRequestPtr>& requests);

// Completes when every request it holds has (null ones count as complete).
class CombinedRequest : public CommRequest {
 public:
  explicit CombinedRequest(std::vector<CommRequestPtr> requests) : requests_(std::move(requests)) {}

 protected:
  void do_wait() override { wait_all(requests_); }
  bool do_test() override;

 private:
  std::vector<CommRequestPtr> requests_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: every rank ends with the reduction of all ranks' buffers.
  void allreduce(void* data, int64_t count, DType dtype, ReduceOp op);
  CommRequestPtr iallreduce(void* data, int64_t count, DType dtype, ReduceOp op);
  // Several buffers of one dtype reduced in place as one operation where the implementation can
  // fuse them without copies (NCCL's grouped calls); each buffer is recorded as an iallreduce of
  // its own. The request completes when every buffer's reduction has.
  CommRequestPtr iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts, DType dtype,
                                  ReduceOp op);
  void broadcast(void* data, int64_t count, DType dtype, int root);
  CommRequestPtr ibroadcast(void* data, int64_t count, DType dtype, int root);
  // recv (significant at root only) holds size() x count elements, rank r's at r x count.
  void gather(const void* send, int64_t count, DType dtype, void* recv, int root);
  // Rank r sends counts[r] elements (counts significant at root); recv holds their sum, in rank order.
  void gatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>& counts,
               int root);
  // Every rank receives size() x count elements.
  void allgather(const void* send, int64_t count, DType dtype, void* recv);
  // counts: every rank's count, known to all; recv holds their sum in rank order.
  void allgatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>& counts);
  // send (significant at root) holds size() x count elements; rank r receives the r-th count.
  void scatter(const void* send, int64_t count, DType dtype, void* recv, int root);
  void barrier();

  void send(const void* data, int64_t count, DType dtype, int peer, int tag = 0);
  void recv(void* data, int64_t count, DType dtype, int peer, int tag = 0);
  // Receives count elements with `tag` from whichever rank sends first; returns that rank.
  int recv_any(void* data, int64_t count, DType dtype, int tag = 0);
  CommRequestPtr isend(const void* data, int64_t count, DType dtype, int peer, int tag = 0);
  CommRequestPtr irecv(void* data, int64_t count, DType dtype, int peer, int tag = 0);
  void sendrecv(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count, int source,
                DType dtype, int tag = 0);
  // Sends `send` to every neighbour and receives count elements from each into
  // recv + i x count (neighbours[i]). Listing a rank twice (a ring of two) exchanges twice.
  void neighbor_exchange(const std::vector<int>& neighbours, const void* send, int64_t count, DType dtype,
                         void* recv);
  // The left and right neighbours of this rank on the ring 0, 1, ..., size()-1.
  std::vector<int> ring_neighbours() const;

  // Typed conveniences.
  template <typename T> void allreduce(std::span<T> data, ReduceOp op) {
    allreduce(data.data(), static_cast<int64_t>(data.size()), dtype_of_v<T>, op);
  }
  template <typename T> void broadcast(std::span<T> data, int root) {
    broadcast(data.data(), static_cast<int64_t>(data.size()), dtype_of_v<T>, root);
  }
  // Tensors on any device: one the implementation reaches is passed as it is, any other goes
  // through a host copy (host_staging.h), counted in volume().staging().
  void allreduce(Tensor& t, ReduceOp op);
  void broadcast(Tensor& t, int root);
  // The reduction lands in t when the request completes.
  CommRequestPtr iallreduce(Tensor& t, ReduceOp op);

  // Whether the implementation's calls take pointers to memory of device d (the raw-pointer calls
  // above must only be given such memory). The base: memory host code may read. A GPU-aware
  // implementation (NCCL, a CUDA-aware MPI) says yes for its GPUs.
  virtual bool reaches(Device d) const;

  CommunicationVolume& volume() { return volume_; }
  const CommunicationVolume& volume() const { return volume_; }

 protected:
  explicit Communicator(int ranks) : volume_(ranks) {}
  // The hooks an implementation supplies. A mean is passed down only where divides_means() says
  // so; otherwise the base reduces with sum and divides, so every implementation agrees on how a
  // mean rounds (x / n).
  virtual void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  virtual CommRequestPtr do_iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // The base starts one do_iallreduce per buffer.
  virtual CommRequestPtr do_iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts,
                                             DType dtype, ReduceOp op);
  virtual void do_broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual CommRequestPtr do_ibroadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual void do_gatherv(const void* send, int64_t count, DType dtype, void* recv,
                          const std::vector<int64_t>& counts, int root) = 0;
  virtual void do_allgatherv(const void* send, int64_t count, DType dtype, void* recv,
                             const std::vector<int64_t>& counts) = 0;
  virtual void do_scatter(const void* send, int64_t count, DType dtype, void* recv, int root) = 0;
  virtual void do_barrier() = 0;
  virtual CommRequestPtr do_isend(const void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual CommRequestPtr do_irecv(void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual int do_recv_any(void* data, int64_t count, DType dtype, int tag) = 0;
  // Divides a mean's sum in place. The base divides with host loops; an implementation that
  // reaches device memory divides there, rounding as the host does (x / n).
  virtual void do_divide(void* data, int64_t count, DType dtype, int ranks);
  // Whether a collective on `data` is carried by a device library from device memory (NCCL); the
  // volume counts those calls apart (CollectiveVolume::device_calls). The base: never.
  virtual bool carried_on_device(const void* data) const;
  // Whether the implementation takes a mean on `data` itself: the sum, then x / n in the order of
  // its own work (a GPU stream), so that a nonblocking mean completes without a division after
  // the wait. The base: never; it passes a sum down and divides with do_divide.
  virtual bool divides_means(const void* data) const;

 private:
  void check_peer(int peer, const char* what) const;
  CommRequestPtr accounted(CommRequestPtr request);
  void record_from_root(int root, int64_t bytes);
  CommRequestPtr point_to_point(const char* what, int64_t count, DType dtype, int peer,
                                const std::function<CommRequestPtr()>& start);

  CommunicationVolume volume_;
};

// Divides count elements of dtype by `ranks` in place (the mean after a sum).
void divide_in_place(void* data, int64_t count, DType dtype, int ranks);
// Refuses (InvalidArgument) a mean of anything but f32 or f64.
void check_mean(ReduceOp op, DType dtype);

}  // namespace d5
