#pragma once
// Level 2: the data loader (docs/data-loader.md). It draws index batches from a Sampler, fetches
// them from a Dataset, applies BatchTransforms, and hands batches to the consumer (the trainer)
// in sampler order. With prefetch K > 0, background workers produce up to K batches ahead of the
// consumer, so reading and decoding overlap with training; with K = 0 everything happens inside
// next(). Either way the batches, their order and state() are the same.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/train/dataset.h"
#include "deep500/train/sampler.h"

namespace d5 {

struct DataLoaderOptions {
  int64_t prefetch = 2;  // batches produced ahead of the consumer; 0: synchronous
  int workers = 1;       // background threads producing batches (prefetch > 0 only)
  // Batch tensor name -> the device it is handed out on (docs/data-loader.md#device-batches). The
  // producer copies it there through the device's staging memory (page-locked host buffers on
  // CUDA) on a copy queue beside the device's compute, so with prefetch the copies of the next
  // batches overlap the current step. Tensors not named stay on the host.
  std::map<std::string, Device> devices = {};
};

// Per batch handed to the consumer, in hand-out order (seconds, wall clock).
struct BatchTiming {
  double fetch_s = 0;      // Dataset::fetch: read + decode + assemble
  double transform_s = 0;  // every BatchTransform
  double copy_s = 0;       // to the devices of DataLoaderOptions::devices (0 without)
  double produce_s = 0;    // fetch_s + transform_s + copy_s
  double wait_s = 0;       // how long next() blocked the consumer for this batch
};

class DataLoader {
 public:
  // The dataset must outlive the loader; the loader owns the sampler. Transforms run in order
  // after fetch with the batch's indices and epoch.
  DataLoader(const Dataset& dataset, std::unique_ptr<Sampler> sampler, DataLoaderOptions options = {},
             std::vector<std::shared_ptr<const BatchTransform>> transforms = {});
  ~DataLoader();  // stops the workers; batches still in flight are dropped
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch of the current epoch, or nullopt at its end (and on every call after, until
  // start_next_epoch). An exception thrown while producing a batch (by the sampler, fetch or a
  // transform) is rethrown here when the consumer reaches that batch; the failed batch counts as
  // consumed, so the following call moves on to the next batch.
  std::optional<Batch> next();
  // Begins the next epoch, dropping whatever is left of the current one.
  void start_next_epoch();

  // The sampler position as of the last batch handed to the consumer (not the prefetcher's):
  // restore(state()) on a fresh loader continues with the batch this one would hand out next.
  SamplerState state() const { return consumer_state_; }
  void restore(const SamplerState& state);
  int64_t epoch() const { return consumer_state_.epoch; }
  int64_t batches_per_epoch();

  // The indices of the last batch next() returned (or threw for).
  const std::vector<int64_t>& last_indices() const { return last_indices_; }
  const std::vector<BatchTiming>& timings() const { return timings_; }

  const Dataset& dataset() const { return dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  int64_t batch_size() const { return sampler_->batch_size(); }

 private:
  struct Item {
    std::vector<int64_t> indices;
    SamplerState state_after;  // the sampler's position after drawing these indices
    int64_t epoch = 0;
    std::optional<Batch> batch;  // nullopt with no error: the end of the epoch
    std::exception_ptr error;
    double fetch_s = 0, transform_s = 0, copy_s = 0;
  };
  Item draw();  // the sampler's next batch and position; with mutex_ held while workers run
  void produce(Item& item) const;
  std::optional<Batch> hand_out(Item item, double wait_s);
  std::optional<Batch> next_synchronous();
  void worker_loop();
  void start_workers();
  void discard_prefetched();  // with mutex_ held

  const Dataset& dataset_;
  std::unique_ptr<Sampler> sampler_;  // guarded by mutex_ while workers run
  DataLoaderOptions options_;
  std::vector<std::shared_ptr<const BatchTransform>> transforms_;

  // Consumer side (the thread calling next()).
  SamplerState consumer_state_;
  bool at_epoch_end_ = false;
  std::vector<int64_t> last_indices_;
  std::vector<BatchTiming> timings_;

  // Prefetch pipeline. Items are numbered in draw order; the consumer takes them in that order
  // whatever order workers finish in. A restore or new epoch bumps `generation_`, so results of
  // fetches started before it are dropped.
  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers: room to draw, or stop
  std::condition_variable ready_cv_;  // consumer: the item it waits for arrived
  std::vector<std::thread> workers_;
  bool stop_ = false;
  bool epoch_drawn_ = false;  // the end-of-epoch marker has been drawn
  uint64_t generation_ = 0;
  int64_t drawn_ = 0;
  int64_t handed_ = 0;
  std::map<int64_t, Item> ready_;
};

}  // namespace d5
