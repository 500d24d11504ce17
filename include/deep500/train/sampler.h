#pragma once
// Level 2: samplers decide which samples form each batch (docs/samplers.md).
//
// A sampler plans one epoch at a time as a list of batches of dataset indices; next() hands them
// out and returns an empty batch at the end of the epoch, after which reset() starts the next
// one. An epoch's plan depends only on (seed, epoch), never on earlier epochs or on timing, so
// state() = (epoch, batches consumed) is a complete checkpoint: restore() reproduces exactly the
// batches an uninterrupted run would have drawn. Level 3's distributed samplers derive from this.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace d5 {

class Sampler;

class SamplerEvent {
 public:
  virtual ~SamplerEvent() = default;
  virtual void on_reset(const Sampler& /*sampler*/, int64_t /*epoch*/) {}
  virtual void before_sampling(const Sampler& /*sampler*/) {}
  virtual void after_sampling(const Sampler& /*sampler*/, const std::vector<int64_t>& /*batch*/) {}
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t batch = 0;  // batches of this epoch already handed out
};

class Sampler {
 public:
  // batch_size > 0; drop_last leaves out a final batch smaller than batch_size.
  Sampler(int64_t dataset_size, int64_t batch_size, bool drop_last, uint64_t seed);
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;

  std::vector<int64_t> next();  // empty at the end of the epoch
  void reset();                 // begins the next epoch
  int64_t epoch() const { return state_.epoch; }
  int64_t batches_per_epoch();  // of the current epoch's plan
  SamplerState state() const { return state_; }
  void restore(const SamplerState& state);

  int64_t dataset_size() const { return dataset_size_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  uint64_t seed() const { return seed_; }

  void add_event(std::shared_ptr<SamplerEvent> event) { events_.push_back(std::move(event)); }

 protected:
  // The batches of one epoch, a pure function of (seed, epoch) and the constructor arguments.
  virtual std::vector<std::vector<int64_t>> plan_epoch(int64_t epoch) const = 0;
  // Cuts a sequence of indices into batches, honouring drop_last.
  std::vector<std::vector<int64_t>> split_into_batches(const std::vector<int64_t>& order) const;

 private:
  void ensure_plan();
  int64_t dataset_size_;
  int64_t batch_size_;
  bool drop_last_;
  uint64_t seed_;
  SamplerState state_;
  int64_t planned_epoch_ = -1;
  std::vector<std::vector<int64_t>> plan_;
  std::vector<std::shared_ptr<SamplerEvent>> events_;
};

}  // namespace d5
