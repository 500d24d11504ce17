#pragma once
// Level 2: the shipped samplers (docs/samplers.md). Each plans an epoch as a pure function of
// (seed, epoch), so Sampler::restore reproduces an uninterrupted run exactly.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/train/dataset.h"
#include "deep500/train/sampler.h"

namespace d5 {

// Indices 0, 1, ..., n-1 in order every epoch; the seed is unused.
class OrderedSampler : public Sampler {
 public:
  OrderedSampler(int64_t dataset_size, int64_t batch_size, bool drop_last = false, uint64_t seed = 0)
      : Sampler(dataset_size, batch_size, drop_last, seed) {}
  std::string name() const override { return "ordered"; }

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;
};

// A fresh permutation every epoch: Fisher-Yates driven by RngStream(seed, "shuffle").child(epoch),
// so epoch e's order does not depend on how many epochs ran before it.
class ShuffleSampler : public Sampler {
 public:
  ShuffleSampler(int64_t dataset_size, int64_t batch_size, bool drop_last = false, uint64_t seed = 0)
      : Sampler(dataset_size, batch_size, drop_last, seed) {}
  std::string name() const override { return "shuffle"; }
  // The permutation of [0, n) for one epoch, exposed for samplers built on it.
  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;
};

// Variable-length samples: samples are grouped into buckets by Dataset::sample_length, every batch
// comes from one bucket (so padding stays small), samples are shuffled within each bucket and the
// order of all batches is shuffled every epoch. drop_last applies per bucket.
class BucketSampler : public Sampler {
 public:
  // Bucket i holds lengths in [boundaries[i-1], boundaries[i]); the first bucket starts at 0 and
  // the last is open-ended, so k boundaries make k+1 buckets. Boundaries must be strictly
  // increasing and > 0. Empty boundaries pick up to `auto_buckets` buckets holding about equally
  // many samples (quantiles of the lengths). InvalidArgument when every sample has length 0
  // (fixed-size data: use ShuffleSampler).
  BucketSampler(const Dataset& dataset, int64_t batch_size, bool drop_last = false, uint64_t seed = 0,
                std::vector<int64_t> boundaries = {}, int auto_buckets = 8);
  std::string name() const override { return "bucket"; }
  const std::vector<int64_t>& boundaries() const { return boundaries_; }
  // Sample indices per bucket, in index order.
  const std::vector<std::vector<int64_t>>& buckets() const { return buckets_; }

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;

 private:
  std::vector<int64_t> boundaries_;
  std::vector<std::vector<int64_t>> buckets_;
};

// Random choice of `samples_per_epoch` indices per epoch, with or without replacement, uniformly
// or with a probability per sample (weights, normalized here; zero excludes a sample).
struct ChoiceOptions {
  bool replacement = true;
  int64_t samples_per_epoch = -1;  // -1: the dataset size
  std::vector<double> weights;     // empty: uniform; else one non-negative weight per sample
};

class ChoiceSampler : public Sampler {
 public:
  ChoiceSampler(int64_t dataset_size, int64_t batch_size, bool drop_last, uint64_t seed, ChoiceOptions options);
  std::string name() const override { return "choice"; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  bool replacement() const { return replacement_; }
  // Normalized selection probabilities (empty when uniform).
  const std::vector<double>& probabilities() const { return probabilities_; }
  // Weights 1 / (samples of the label's class): every class is drawn equally often in
  // expectation, whatever the dataset's label histogram. InvalidArgument without class labels.
  static std::vector<double> class_balanced_weights(const Dataset& dataset);

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const override;

 private:
  bool replacement_;
  int64_t samples_per_epoch_;
  std::vector<double> probabilities_;
  std::vector<double> cumulative_;  // prefix sums of probabilities_, for draws with replacement
};

// Sampler by name: "ordered", "shuffle", "bucket" (automatic boundaries), "choice" (uniform,
// with replacement, one dataset's worth per epoch: a bootstrap), "balanced" (class-balanced
// choice with replacement). InvalidArgument listing the names for an unknown one.
// register_sampler adds one (or replaces one of the same name), e.g. from a user's program.
using SamplerFactory =
    std::function<std::unique_ptr<Sampler>(const Dataset& dataset, int64_t batch_size, bool drop_last, uint64_t seed)>;
void register_sampler(const std::string& name, const std::string& description, SamplerFactory factory);
std::unique_ptr<Sampler> make_sampler(const std::string& name, const Dataset& dataset, int64_t batch_size,
                                      bool drop_last, uint64_t seed);
std::vector<std::pair<std::string, std::string>> sampler_names();  // name, description

}  // namespace d5
