// Sampler base: epoch plans, hand-out position, events, restore (include/deep500/train/sampler.h).
#include "deep500/train/sampler.h"

#include "deep500/core/error.h"

namespace d5 {

Sampler::Sampler(int64_t dataset_size, int64_t batch_size, bool drop_last, uint64_t seed)
    : dataset_size_(dataset_size), batch_size_(batch_size), drop_last_(drop_last), seed_(seed) {
  D5_CHECK_ARG(dataset_size >= 0, "sampler: dataset size must be >= 0, got {}", dataset_size);
  D5_CHECK_ARG(batch_size > 0, "sampler: batch size must be > 0, got {}", batch_size);
}

void Sampler::ensure_plan() {
  if (planned_epoch_ == state_.epoch) return;
  plan_ = plan_epoch(state_.epoch);
  planned_epoch_ = state_.epoch;
}

std::vector<int64_t> Sampler::next() {
  ensure_plan();
  for (const auto& e : events_) e->before_sampling(*this);
  if (state_.batch >= static_cast<int64_t>(plan_.size())) return {};
  std::vector<int64_t> batch = plan_[static_cast<size_t>(state_.batch)];
  ++state_.batch;
  for (const auto& e : events_) e->after_sampling(*this, batch);
  return batch;
}

void Sampler::reset() {
  ++state_.epoch;
  state_.batch = 0;
  for (const auto& e : events_) e->on_reset(*this, state_.epoch);
}

int64_t Sampler::batches_per_epoch() {
  ensure_plan();
  return static_cast<int64_t>(plan_.size());
}

void Sampler::restore(const SamplerState& state) {
  D5_CHECK_ARG(state.epoch >= 0 && state.batch >= 0,
               "{} sampler: cannot restore epoch {}, batch {} (both must be >= 0)", name(), state.epoch, state.batch);
  const SamplerState previous = state_;
  state_ = SamplerState{state.epoch, 0};
  ensure_plan();
  if (state.batch > static_cast<int64_t>(plan_.size())) {
    const auto planned = plan_.size();
    state_ = previous;
    D5_THROW(InvalidArgument,
             "{} sampler: cannot restore batch {} of epoch {}: that epoch has only {} batches (was the checkpoint "
             "written with another dataset size, batch size or seed?)",
             name(), state.batch, state.epoch, planned);
  }
  state_.batch = state.batch;
}

std::vector<std::vector<int64_t>> Sampler::split_into_batches(const std::vector<int64_t>& order) const {
  std::vector<std::vector<int64_t>> batches;
  const auto n = static_cast<int64_t>(order.size());
  for (int64_t begin = 0; begin < n; begin += batch_size_) {
    const int64_t end = std::min(n, begin + batch_size_);
    if (end - begin < batch_size_ && drop_last_) break;
    batches.emplace_back(order.begin() + begin, order.begin() + end);
  }
  return batches;
}

}  // namespace d5
