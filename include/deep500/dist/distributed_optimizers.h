#pragma once
// Level 3: the shipped distributed schemes (docs/distributed-optimizers.md), after Deep500's
// ConsistentDecentralized, ConsistentCentralized, ... Each wraps a Level-2 optimizer.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/dist/distributed_optimizer.h"
#include "deep500/dist/gradient_buckets.h"
#include "deep500/dist/gradient_overlap.h"

namespace d5 {

// DSGD: the mean of all ranks' gradients by bucketed allreduce, then the wrapped update on every
// rank. Works with any optimizer that calls the gradient hook. With overlap, buckets start during
// backprop as their gradients become ready (OverlappedAllreduce); without, after it.
class ConsistentDecentralized : public DistributedOptimizer {
 public:
  struct Options {
    double bucket_mb = 25;  // most MiB fused into one allreduce; 0: one allreduce per tensor
    double fuse_kb = BucketPolicy::kDefaultFuseBelowBytes / 1024.0;  // only smaller tensors are fused
    bool overlap = true;    // start buckets during backprop (gradient_overlap.h)
  };
  ConsistentDecentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  ~ConsistentDecentralized() override;
  std::string scheme() const override { return "dsgd"; }
  const TensorBuckets& buckets() const { return buckets_; }
  // The overlap event of the executor last stepped with; null without overlap.
  const OverlappedAllreduce* overlap() const { return overlap_.get(); }

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  TensorBuckets buckets_;
  bool overlap_enabled_;
  std::shared_ptr<OverlappedAllreduce> overlap_;
  const GraphExecutor* overlap_executor_ = nullptr;
};

// Synchronous parameter server: gradients gathered at the root, averaged and applied there by the
// wrapped optimizer (the only copy of its state), parameters broadcast back.
class ConsistentCentralized : public DistributedOptimizer {
 public:
  struct Options {
    int root = 0;  // the parameter server's rank
  };
  ConsistentCentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  std::string scheme() const override { return "pssgd"; }

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  int root_;
};

// Asynchronous parameter server (Hogwild-style over messages): rank 0 holds the only optimizer
// state and serves; workers push their gradient and pull the parameters with no barrier. The
// server's step applies its own gradient, then serves N - 1 pushes from whichever workers send
// first (a fast worker may be served twice, a slow one not at all), each applied to the current
// parameters and answered with them, so a worker's next gradient is computed on parameters
// that other workers' updates may since have moved (staleness is not bounded). finish()
// broadcasts the server's parameters, so every rank ends with them.
//
// Which worker is served when depends on timing, so two runs differ. With fixed_order the server
// serves workers 1, ..., N - 1 in rank order, one push each per step: a run is then a pure
// function of its inputs and can be checked against a serial simulation, at the cost of fast
// workers waiting for slow ones.
class InconsistentCentralized : public DistributedOptimizer {
 public:
  struct Options {
    bool fixed_order = false;  // serve workers in rank order, one push each per server step
  };
  InconsistentCentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  std::string scheme() const override { return "asgd"; }
  void finish(Network& network) override;

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  bool fixed_order_;
};

// Bounded staleness: step t's averaged gradient is started with a nonblocking allreduce and
// applied at step t + s, so communication overlaps s steps of compute and no rank runs more than
// s steps ahead of the slowest one (it waits for that allreduce). s = 0 is DSGD. The first s
// steps apply no update; finish() applies the last s.
class StaleSynchronous : public DistributedOptimizer {
 public:
  struct Options {
    int64_t staleness = 0;  // updates may use gradients up to this many steps old
  };
  StaleSynchronous(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  std::string scheme() const override { return "ssgd"; }
  void finish(Network& network) override;

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  struct Pending {
    std::vector<float> gradient;
    CommRequestPtr request;
  };
  void apply_oldest(Network& network);
  int64_t staleness_;
  std::deque<std::unique_ptr<Pending>> pending_;
};

// Model averaging (local SGD): local steps, parameters averaged over all ranks every k steps and
// at finish() when local steps remain. k = 1 with plain SGD is DSGD.
class ModelAverage : public DistributedOptimizer {
 public:
  struct Options {
    int64_t average_every = 1;  // local steps between parameter averages
  };
  ModelAverage(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  std::string scheme() const override { return "mavg"; }
  void finish(Network& network) override;

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  int64_t every_;
  int64_t since_average_ = 0;
  TensorBuckets buckets_{int64_t{64} << 20};
};

// Decentralized parallel SGD (Lian et al., NeurIPS 2017): a local step, then each rank replaces
// its parameters by the mean of its own and its distinct ring neighbours' (one neighbour on two
// ranks, none on one).
class ConsistentNeighbors : public DistributedOptimizer {
 public:
  ConsistentNeighbors(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm);
  std::string scheme() const override { return "dpsgd"; }

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;
};

// Top-k sparsified DSGD with error feedback: each rank adds its residual to its gradient, sends
// the k = ceil(topk x elements) largest magnitudes as (index, value) pairs and keeps the rest as
// the next residual. The sparse allreduce gathers every rank's pairs (SparCML's sparse
// allgather) and sums them in rank order, or, when the gathered pairs would take more bytes than
// the dense vector (SparCML's switch to dense), allreduces the scattered values densely. topk = 1
// is DSGD.
class SparseAllreduce : public DistributedOptimizer {
 public:
  struct Options {
    double topk = 0.01;  // fraction of gradient elements each rank sends, in (0, 1]
  };
  SparseAllreduce(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options options);
  std::string scheme() const override { return "sparse"; }
  // Steps that went dense (the gathered pairs would have outweighed the dense vector).
  int64_t dense_steps() const { return dense_steps_; }

 protected:
  TensorMap distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override;

 private:
  void reduce(Network& network);
  double topk_;
  std::vector<float> residual_;
  int64_t dense_steps_ = 0;
};

}  // namespace d5
