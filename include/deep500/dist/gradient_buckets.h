#pragma once
// Level 3: fused communication of many tensors (docs/distributed-optimizers.md).
//
// Allreducing a network's gradients one tensor at a time pays MPI's per-call latency once per
// tensor (62 calls for ResNet-18). TensorBuckets packs consecutive small tensors of one dtype into
// buckets of at most bucket_bytes and reduces each bucket with one allreduce, then unpacks.
// Packing costs two copies of every fused byte, which only pays for tensors small enough that a
// call's latency outweighs copying them: a tensor of fuse_below_bytes or more is never packed but
// reduced alone, in place. bucket_bytes = 0 is plain per-tensor allreduce. Buckets are packed in
// host memory, so tensors on a device the communicator reaches (NCCL's GPU) are never packed
// (packable()): a bucket of them is reduced where they lie, as one grouped call
// (Communicator::iallreduce_group).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/net/network.h"
#include "deep500/core/tensor.h"

namespace d5 {

// Which tensors share a bucket; also used by the overlapped allreduce (gradient_overlap.h).
struct BucketPolicy {
  // 128 KiB: fusing saves a call's cost a and costs 2b/B to copy b bytes at memory bandwidth B, so
  // it pays below b = aB/2: about 12 KB on shared memory (a = 4.8 us measured), 50-250 KB across a
  // network (a of 20-50 us). Measured (bench/bench_allreduce.cpp, ResNet-18, 4 ranks sharing 2
  // cores): fusing every tensor up to 25 MiB made the exchange 0.58-0.76x as fast as per-tensor;
  // fusing those under 128 KiB, 1.00x, since the few fused bytes cost little to copy.
  static constexpr int64_t kDefaultFuseBelowBytes = int64_t{128} << 10;
  int64_t bucket_bytes = 0;
  int64_t fuse_below_bytes = kDefaultFuseBelowBytes;
  bool fusable(int64_t bytes) const { return bytes < fuse_below_bytes && bytes <= bucket_bytes; }
  // Whether a tensor of `bytes` joins an open bucket of fusable tensors holding `held` bytes.
  bool joins(int64_t held, int64_t bytes) const { return fusable(bytes) && held + bytes <= bucket_bytes; }
};

// Whether t may be packed into a bucket's host buffer: a tensor host code reads, or one the
// communicator cannot reach (staged through the host anyway, so packing saves copies). A tensor on
// a device the communicator reaches is reduced in place instead of copied through the host.
bool packable(const Communicator& comm, const Tensor& t);

class TensorBuckets {
 public:
  // nonblocking = true starts every bucket's allreduce before waiting for any (packing the next
  // bucket overlaps the last one's communication). The default is blocking: Open MPI's blocking
  // algorithms beat its nonblocking ones, 30.9 ms against 43.5 ms for ResNet-18's gradients on 4
  // ranks sharing 2 cores, and after backprop there is nothing else to overlap.
  explicit TensorBuckets(int64_t bucket_bytes, bool nonblocking = false,
                         int64_t fuse_below_bytes = BucketPolicy::kDefaultFuseBelowBytes)
      : policy_{bucket_bytes, fuse_below_bytes}, nonblocking_(nonblocking) {}

  // Reduces every tensor in place across the communicator's ranks (f32 or f64 tensors, on any
  // device: those the communicator does not reach are staged through the buckets' host buffers).
  // The list must have the same shapes and dtypes, in the same order, on every rank.
  void allreduce(Communicator& comm, std::vector<Tensor>& tensors, ReduceOp op);

  int64_t bucket_bytes() const { return policy_.bucket_bytes; }
  const BucketPolicy& policy() const { return policy_; }
  // Buckets of the last call (one allreduce each) and the bytes they carried.
  size_t buckets() const { return plan_.size(); }
  int64_t bytes() const;

 private:
  struct Bucket {
    size_t first = 0, last = 0;  // tensors [first, last)
    DType dtype = DType::f32;
    int64_t bytes = 0;
    bool fusable = false;
    bool packed = true;  // through the host buffer; else grouped where the tensors lie
  };
  void plan(const Communicator& comm, const std::vector<Tensor>& tensors);

  BucketPolicy policy_;
  bool nonblocking_;
  std::vector<Bucket> plan_;
  std::vector<std::pair<size_t, bool>> planned_;  // bytes and packable() per tensor, to notice a change
  std::vector<std::vector<std::byte>> buffers_;
};

// The network's parameter gradients that have values, in Network::gradient() order (the same on
// every rank), and the matching parameters; both share storage with the network.
std::vector<Tensor> gradient_tensors(const Network& network);
std::vector<Tensor> parameter_tensors(const Network& network);

// One contiguous f32 vector holding a list of f32 tensors in order, and back (schemes that
// gather, sparsify or mix whole models). InvalidArgument for other dtypes. Tensors on a device are
// copied through the host, counted in `staging` when given (host_staging.h).
std::vector<float> pack_f32(const std::vector<Tensor>& tensors, CommunicationVolume* staging = nullptr);
void unpack_f32(const std::vector<float>& flat, std::vector<Tensor>& tensors, CommunicationVolume* staging = nullptr);

}  // namespace d5
