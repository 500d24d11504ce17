// The shipped samplers (include/deep500/train/samplers.h, docs/samplers.md).
#include "deep500/train/samplers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/registry.h"
#include "deep500/core/rng.h"

namespace d5 {

namespace {

// Fisher-Yates (Durstenfeld): position i takes a uniformly chosen element of [i, n).
template <typename T>
void shuffle_in_place(std::vector<T>& v, RngStream& rng) {
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const size_t j = i + static_cast<size_t>(rng.below(v.size() - i));
    std::swap(v[i], v[j]);
  }
}

RngStream epoch_stream(uint64_t seed, const char* sampler, int64_t epoch) {
  return RngStream(seed, sampler).child(std::to_string(epoch));
}

}  // namespace

std::vector<std::vector<int64_t>> OrderedSampler::plan_epoch(int64_t /*epoch*/) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size()));
  std::iota(order.begin(), order.end(), int64_t{0});
  return split_into_batches(order);
}

std::vector<int64_t> ShuffleSampler::permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  RngStream rng = epoch_stream(seed, "shuffle", epoch);
  shuffle_in_place(order, rng);
  return order;
}

std::vector<std::vector<int64_t>> ShuffleSampler::plan_epoch(int64_t epoch) const {
  return split_into_batches(permutation(dataset_size(), seed(), epoch));
}

BucketSampler::BucketSampler(const Dataset& dataset, int64_t batch_size, bool drop_last, uint64_t seed,
                             std::vector<int64_t> boundaries, int auto_buckets)
    : Sampler(dataset.size(), batch_size, drop_last, seed), boundaries_(std::move(boundaries)) {
  const int64_t n = dataset.size();
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    lengths[static_cast<size_t>(i)] = dataset.sample_length(i);
    D5_CHECK_ARG(lengths[static_cast<size_t>(i)] >= 0, "bucket sampler: dataset '{}' reports length {} for sample {}",
                 dataset.name(), lengths[static_cast<size_t>(i)], i);
  }
  D5_CHECK_ARG(std::any_of(lengths.begin(), lengths.end(), [](int64_t l) { return l > 0; }) || n == 0,
               "bucket sampler: dataset '{}' has fixed-size samples (sample_length is 0 for all); use the shuffle "
               "sampler",
               dataset.name());
  if (boundaries_.empty()) {
    D5_CHECK_ARG(auto_buckets >= 1, "bucket sampler: auto_buckets must be >= 1, got {}", auto_buckets);
    std::vector<int64_t> sorted = lengths;
    std::sort(sorted.begin(), sorted.end());
    for (int b = 1; b < auto_buckets && n > 0; ++b) {
      const int64_t q = sorted[static_cast<size_t>(n * b / auto_buckets)];
      if (q > 0 && (boundaries_.empty() || q > boundaries_.back())) boundaries_.push_back(q);
    }
  }
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    D5_CHECK_ARG(boundaries_[i] > 0 && (i == 0 || boundaries_[i] > boundaries_[i - 1]),
                 "bucket sampler: boundaries must be positive and strictly increasing, got [{}]",
                 fmt::join(boundaries_, ", "));
  }
  buckets_.resize(boundaries_.size() + 1);
  for (int64_t i = 0; i < n; ++i) {
    const auto b = std::upper_bound(boundaries_.begin(), boundaries_.end(), lengths[static_cast<size_t>(i)]) -
                   boundaries_.begin();
    buckets_[static_cast<size_t>(b)].push_back(i);
  }
}

std::vector<std::vector<int64_t>> BucketSampler::plan_epoch(int64_t epoch) const {
  std::vector<std::vector<int64_t>> batches;
  const RngStream base = epoch_stream(seed(), "bucket", epoch);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<int64_t> members = buckets_[b];
    RngStream rng = base.child(std::to_string(b));
    shuffle_in_place(members, rng);
    for (auto& batch : split_into_batches(members)) batches.push_back(std::move(batch));
  }
  RngStream order = base.child("order");
  shuffle_in_place(batches, order);
  return batches;
}

ChoiceSampler::ChoiceSampler(int64_t dataset_size, int64_t batch_size, bool drop_last, uint64_t seed,
                             ChoiceOptions options)
    : Sampler(dataset_size, batch_size, drop_last, seed),
      replacement_(options.replacement),
      samples_per_epoch_(options.samples_per_epoch < 0 ? dataset_size : options.samples_per_epoch) {
  int64_t eligible = dataset_size;
  if (!options.weights.empty()) {
    D5_CHECK_ARG(static_cast<int64_t>(options.weights.size()) == dataset_size,
                 "choice sampler: {} weights given for {} samples (one per sample)", options.weights.size(),
                 dataset_size);
    double total = 0;
    eligible = 0;
    for (size_t i = 0; i < options.weights.size(); ++i) {
      const double w = options.weights[i];
      D5_CHECK_ARG(std::isfinite(w) && w >= 0, "choice sampler: weight {} of sample {} must be finite and >= 0", w, i);
      total += w;
      eligible += w > 0 ? 1 : 0;
    }
    D5_CHECK_ARG(total > 0, "choice sampler: all weights are zero; give at least one sample a positive weight");
    probabilities_.resize(options.weights.size());
    cumulative_.resize(options.weights.size());
    double running = 0;
    for (size_t i = 0; i < options.weights.size(); ++i) {
      probabilities_[i] = options.weights[i] / total;
      running += options.weights[i];
      cumulative_[i] = running;
    }
  }
  D5_CHECK_ARG(eligible > 0 || samples_per_epoch_ == 0, "choice sampler: cannot draw {} samples from an empty dataset",
               samples_per_epoch_);
  D5_CHECK_ARG(replacement_ || samples_per_epoch_ <= eligible,
               "choice sampler: cannot draw {} samples without replacement from {} samples with non-zero "
               "probability; lower samples_per_epoch or allow replacement",
               samples_per_epoch_, eligible);
}

std::vector<std::vector<int64_t>> ChoiceSampler::plan_epoch(int64_t epoch) const {
  RngStream rng = epoch_stream(seed(), "choice", epoch);
  const auto k = static_cast<size_t>(samples_per_epoch_);
  const int64_t n = dataset_size();
  std::vector<int64_t> picks;
  picks.reserve(k);
  if (probabilities_.empty() && replacement_) {
    for (size_t i = 0; i < k; ++i) picks.push_back(static_cast<int64_t>(rng.below(static_cast<uint64_t>(n))));
  } else if (probabilities_.empty()) {
    // The first k positions of a Fisher-Yates shuffle: a uniform k-subset in random order.
    std::vector<int64_t> pool(static_cast<size_t>(n));
    std::iota(pool.begin(), pool.end(), int64_t{0});
    for (size_t i = 0; i < k; ++i) {
      std::swap(pool[i], pool[i + static_cast<size_t>(rng.below(pool.size() - i))]);
      picks.push_back(pool[i]);
    }
  } else if (replacement_) {
    const double total = cumulative_.back();
    for (size_t i = 0; i < k; ++i) {
      const double u = rng.uniform() * total;
      auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
      // Rounding can put u at the total; the last sample with non-zero weight is the right one.
      if (it == cumulative_.end()) {
        it = std::prev(cumulative_.end());
        while (it != cumulative_.begin() && probabilities_[static_cast<size_t>(it - cumulative_.begin())] == 0) --it;
      }
      picks.push_back(it - cumulative_.begin());
    }
  } else {
    // Weighted sampling without replacement (Efraimidis & Spirakis, IPL 2006): key log(u)/w per
    // sample, the k largest keys win, in decreasing key order (the order sequential draws give).
    std::vector<std::pair<double, int64_t>> keys;
    for (int64_t i = 0; i < n; ++i) {
      const double p = probabilities_[static_cast<size_t>(i)];
      const double u = 1.0 - rng.uniform();  // (0, 1]: log stays finite
      if (p > 0) keys.emplace_back(std::log(u) / p, i);
    }
    std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k), keys.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    for (size_t i = 0; i < k; ++i) picks.push_back(keys[i].second);
  }
  return split_into_batches(picks);
}

std::vector<double> ChoiceSampler::class_balanced_weights(const Dataset& dataset) {
  D5_CHECK_ARG(dataset.classes() > 0, "class-balanced sampling needs class labels; dataset '{}' has none",
               dataset.name());
  const int64_t n = dataset.size();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] = dataset.label(i);
    ++counts[labels[static_cast<size_t>(i)]];
  }
  std::vector<double> weights(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    weights[static_cast<size_t>(i)] = 1.0 / static_cast<double>(counts[labels[static_cast<size_t>(i)]]);
  }
  return weights;
}

namespace {

Registry<SamplerFactory>& samplers() {
  static Registry<SamplerFactory>* r = [] {
    auto* reg = new Registry<SamplerFactory>("sampler");
    reg->add("ordered", "indices in order, every epoch the same",
             [](const Dataset& d, int64_t b, bool dl, uint64_t s) { return std::make_unique<OrderedSampler>(d.size(), b, dl, s); });
    reg->add("shuffle", "a fresh permutation every epoch",
             [](const Dataset& d, int64_t b, bool dl, uint64_t s) { return std::make_unique<ShuffleSampler>(d.size(), b, dl, s); });
    reg->add("bucket", "variable-length samples batched by length bucket (automatic boundaries)",
             [](const Dataset& d, int64_t b, bool dl, uint64_t s) { return std::make_unique<BucketSampler>(d, b, dl, s); });
    reg->add("choice", "uniform random choice with replacement, one dataset's worth per epoch (bootstrap)",
             [](const Dataset& d, int64_t b, bool dl, uint64_t s) {
               return std::make_unique<ChoiceSampler>(d.size(), b, dl, s, ChoiceOptions{});
             });
    reg->add("balanced", "class-balanced random choice with replacement, one dataset's worth per epoch",
             [](const Dataset& d, int64_t b, bool dl, uint64_t s) {
               ChoiceOptions o;
               o.weights = ChoiceSampler::class_balanced_weights(d);
               return std::make_unique<ChoiceSampler>(d.size(), b, dl, s, std::move(o));
             });
    return reg;
  }();
  return *r;
}

}  // namespace

void register_sampler(const std::string& name, const std::string& description, SamplerFactory factory) {
  samplers().add(name, description, std::move(factory));
}

std::unique_ptr<Sampler> make_sampler(const std::string& name, const Dataset& dataset, int64_t batch_size,
                                      bool drop_last, uint64_t seed) {
  return (*samplers().get(name))(dataset, batch_size, drop_last, seed);
}

std::vector<std::pair<std::string, std::string>> sampler_names() { return samplers().descriptions(); }

}  // namespace d5
