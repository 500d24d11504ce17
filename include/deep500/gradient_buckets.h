#pragma once
// Level 3: fused communication of many tensors (docs/distributed-optimizers.md).
//
// Allreducing a network's gradients one tensor at a time pays MPI's per-call latency once per
// tensor (62 calls for ResNet-18). TensorBuckets packs consecutive tensors of one dtype into
// buckets of at most bucket_bytes, reduces each bucket with one nonblocking allreduce started as
// soon as it is packed (packing the next bucket overlaps the previous one's communication), and
// unpacks when all complete. A tensor larger than the threshold is its own bucket and is reduced
// in place without a copy; bucket_bytes = 0 is plain per-tensor allreduce.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "deep500/communicator.h"
#include "deep500/network.h"
#include "deep500/tensor.h"

namespace d5 {

class TensorBuckets {
 public:
  // nonblocking = false reduces bucket after bucket with blocking allreduce: no overlap, but MPI's
  // blocking algorithms, which can be faster than its nonblocking ones when ranks share cores.
  explicit TensorBuckets(int64_t bucket_bytes, bool nonblocking = true)
      : bucket_bytes_(bucket_bytes), nonblocking_(nonblocking) {}

  // Reduces every tensor in place across the communicator's ranks (f32 or f64 tensors). The list
  // must have the same shapes and dtypes, in the same order, on every rank.
  void allreduce(Communicator& comm, std::vector<Tensor>& tensors, ReduceOp op);

  int64_t bucket_bytes() const { return bucket_bytes_; }
  // Buckets of the last call (one allreduce each) and the bytes they carried.
  size_t buckets() const { return plan_.size(); }
  int64_t bytes() const;

 private:
  struct Bucket {
    size_t first = 0, last = 0;  // tensors [first, last)
    DType dtype = DType::f32;
    int64_t bytes = 0;
  };
  void plan(const std::vector<Tensor>& tensors);

  int64_t bucket_bytes_;
  bool nonblocking_;
  std::vector<Bucket> plan_;
  std::vector<size_t> planned_bytes_;  // per tensor, to notice a changed list
  std::vector<std::vector<std::byte>> buffers_;
};

// The network's parameter gradients that have values, in Network::gradient() order (the same on
// every rank), and the matching parameters; both share storage with the network.
std::vector<Tensor> gradient_tensors(const Network& network);
std::vector<Tensor> parameter_tensors(const Network& network);

// One contiguous f32 vector holding a list of f32 tensors in order, and back (schemes that
// gather, sparsify or mix whole models). InvalidArgument for other dtypes.
std::vector<float> pack_f32(const std::vector<Tensor>& tensors);
void unpack_f32(const std::vector<float>& flat, std::vector<Tensor>& tensors);

}  // namespace d5
