#pragma once
// Pieces the image dataset formats share: split checking, the preprocessing options, and the
// worker pool that decodes a batch's images in parallel.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deep500/train/dataset.h"
#include "lv2/images/jpeg.h"
#include "../data/dataset_options.h"

namespace d5::images {

// "train" or "test"; InvalidArgument otherwise.
void check_split(const DatasetSpec& spec);

// Options resize, crop, normalize (none|imagenet) of dataset `name`.
ImagePreprocess preprocess_options(const data::DatasetOptions& options, const std::string& name);
// Option threads (default: hardware threads).
int thread_option(const data::DatasetOptions& options);

class WorkerPool;
// "input" f32 [3, crop, crop] and "labels" i64.
std::map<std::string, TensorDesc> image_sample_descs(const ImagePreprocess& p);
// A batch of n images assembled on the pool: load(i, out) writes sample i (the i-th of the
// batch) to out[3 * crop * crop] and returns its label.
Batch decode_batch(WorkerPool& pool, const ImagePreprocess& p, int64_t n,
                   const std::function<int64_t(int64_t, float*)>& load);

// A fixed set of threads running one parallel loop at a time (concurrent callers take turns);
// the calling thread works too, so threads == 1 runs inline.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // fn(i) for every i in [0, n); the first exception thrown is rethrown after all stop.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void work();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one loop at a time
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, next_ = 0;
  int busy_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace d5::images
