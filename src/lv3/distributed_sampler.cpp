// Partitioned and replicated sampling across ranks (include/deep500/dist/distributed_sampler.h).
#include "deep500/dist/distributed_sampler.h"

#include "deep500/core/error.h"
#include "deep500/train/samplers.h"

namespace d5 {

DistributedSampler::DistributedSampler(GlobalFactory make_global, int64_t dataset_size, int64_t batch, uint64_t seed,
                                       int rank, int ranks, Distribution distribution)
    : Sampler(dataset_size, batch, /*drop_last=*/true, seed),
      make_global_(std::move(make_global)),
      rank_(rank),
      ranks_(ranks),
      distribution_(distribution) {
  D5_CHECK_ARG(ranks >= 1 && rank >= 0 && rank < ranks, "distributed sampler: rank {} of {} ranks", rank, ranks);
  global_name_ = make_global_(global_batch())->name();
}

int64_t DistributedSampler::global_batch() const {
  return distribution_ == Distribution::partitioned ? batch_size() * ranks_ : batch_size();
}

std::string DistributedSampler::name() const {
  return (distribution_ == Distribution::partitioned ? "partitioned-" : "replicated-") + global_name_;
}

std::vector<std::vector<int64_t>> DistributedSampler::plan_epoch(int64_t epoch) const {
  // The global sampler's plan depends only on (seed, epoch): a fresh one restored to the epoch
  // draws exactly the batches one process would.
  std::unique_ptr<Sampler> global = make_global_(global_batch());
  global->restore(SamplerState{epoch, 0});
  std::vector<std::vector<int64_t>> plan;
  const int64_t b = batch_size();
  const int64_t offset = distribution_ == Distribution::partitioned ? rank_ * b : 0;
  for (auto batch = global->next(); !batch.empty(); batch = global->next()) {
    if (static_cast<int64_t>(batch.size()) < global_batch()) continue;
    plan.emplace_back(batch.begin() + offset, batch.begin() + offset + b);
  }
  return plan;
}

std::unique_ptr<DistributedSampler> make_distributed_sampler(const std::string& name, const Dataset& dataset,
                                                             int64_t batch, uint64_t seed, int rank, int ranks,
                                                             Distribution distribution) {
  auto make_global = [name, &dataset, seed](int64_t global_batch) {
    return make_sampler(name, dataset, global_batch, /*drop_last=*/true, seed);
  };
  return std::make_unique<DistributedSampler>(make_global, dataset.size(), batch, seed, rank, ranks, distribution);
}

}  // namespace d5
