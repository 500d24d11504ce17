#pragma once
// Level 3: distributed samplers (docs/distributed-samplers.md).
//
// Every rank builds the same global sampler (same dataset, same seed) and takes its part of each
// global batch:
// - partitioned: the global batch has ranks x batch samples and rank r takes rows
//   [r x batch, (r+1) x batch). The ranks' shards are disjoint, reshuffled every epoch from the
//   shared seed, and global step t on N ranks covers exactly the samples one process draws at
//   step t with batch N x b and the same sampler (with "ordered": samples t N b ... (t+1) N b - 1).
//   A last global batch with fewer than N x b samples is left out, since all ranks step together.
// - replicated: every rank draws the whole global batch of `batch` samples (same data on every
//   rank: for schemes whose ranks must agree, and as the baseline of data parallelism).
// The plan is a pure function of (seed, epoch), so checkpoints restore it like any Sampler's.
#include <functional>
#include <memory>
#include <string>

#include "deep500/train/dataset.h"
#include "deep500/train/sampler.h"

namespace d5 {

enum class Distribution { partitioned, replicated };

class DistributedSampler : public Sampler {
 public:
  // make_global(global_batch) builds the global sampler; it is called once per planned epoch.
  using GlobalFactory = std::function<std::unique_ptr<Sampler>(int64_t global_batch)>;
  DistributedSampler(GlobalFactory make_global, int64_t dataset_size, int64_t batch, uint64_t seed, int rank,
                     int ranks, Distribution distribution);
  std::string name() const override;
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  Distribution distribution() const { return distribution_; }
  int64_t global_batch() const;

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;

 private:
  GlobalFactory make_global_;
  int rank_, ranks_;
  Distribution distribution_;
  std::string global_name_;
};

// A distributed sampler over make_sampler(name, ...) ("ordered", "shuffle", ...); `batch` is per
// rank. The dataset must outlive the sampler.
std::unique_ptr<DistributedSampler> make_distributed_sampler(const std::string& name, const Dataset& dataset,
                                                             int64_t batch, uint64_t seed, int rank, int ranks,
                                                             Distribution distribution);

}  // namespace d5
