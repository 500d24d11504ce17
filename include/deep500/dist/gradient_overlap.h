#pragma once
// Level 3: gradient allreduce overlapped with backprop (docs/distributed-optimizers.md).
//
// An executor event that watches the backward pass: when the last gradient of a bucket has been
// produced, the bucket's nonblocking allreduce starts while backprop continues, and every later
// backward node gives MPI a chance to progress it (MPI_Test). complete() then finishes what was
// started and reduces the rest, after which the network's gradients are the ranks' mean.
//
// Buckets follow the order in which gradients become ready, learnt in the first step (which
// reduces everything after backprop, with TensorBuckets); that order comes from the graph and
// the executor, so it is the same on every rank and the nonblocking collectives are started in
// the same order everywhere. Only parameters read by exactly one node are overlapped (a gradient
// accumulated over several nodes is final only at the end); the rest, and all gradients of an
// executor whose backward event tensors do not outlive the events
// (GraphExecutor::backward_event_tensors_persist(), false for torch), are reduced after backprop.
// The result is the same either way.
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/dist/gradient_buckets.h"
#include "deep500/net/graph_executor.h"

namespace d5 {

class OverlappedAllreduce : public ExecutorEvent {
 public:
  // The network is the executor's: the one whose backward pass the events will report.
  OverlappedAllreduce(std::shared_ptr<Communicator> comm, const Network& network, const BucketPolicy& policy);

  void before_executor(const TensorMap& feeds) override;
  bool after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs) override;

  // After backprop: the network's gradients become the mean over all ranks.
  void complete(Network& network);
  // Stops reacting to events (the optimizer that owns this is gone; the executor may outlive it).
  void detach() { comm_.reset(); }

  // Buckets whose allreduce started during the last backward pass, of all planned buckets.
  size_t started_during_backprop() const { return started_early_; }
  size_t planned_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::string> params;
    int64_t bytes = 0;
    bool fusable = false;
    bool packed = true;             // several gradients through `buffer`; else grouped where they lie
    std::vector<std::byte> buffer;  // packed gradients; empty for a one-tensor or grouped bucket
    size_t ready = 0;
    CommRequestPtr request;
    Tensor in_place;  // the one tensor reduced in place, for a one-tensor bucket
    std::vector<Tensor> grouped;  // the tensors of a grouped bucket, reduced where they lie
  };
  void plan();
  void start_ready_buckets();
  void start(size_t b, const std::vector<Tensor>& tensors);

  std::shared_ptr<Communicator> comm_;
  BucketPolicy policy_;
  bool planned_ = false;
  std::set<std::string> single_use_;      // f32 parameters read by exactly one node
  std::vector<std::string> ready_order_;  // first step: the order their gradients appeared
  std::vector<Bucket> buckets_;
  std::map<std::string, size_t> bucket_of_;
  std::map<std::string, Tensor> ready_;  // this step's gradients seen in events
  size_t next_to_start_ = 0;
  size_t started_early_ = 0;
  TensorBuckets rest_;  // parameters not overlapped, reduced after backprop
};

}  // namespace d5
