#include "image_common.h"

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5::images {

void check_split(const DatasetSpec& spec) {
  D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "dataset '{}': split must be 'train' or 'test', got '{}'",
               spec.name, spec.split);
}

ImagePreprocess preprocess_options(const data::DatasetOptions& options, const std::string& name) {
  ImagePreprocess p;
  p.resize = static_cast<int>(options.get_int("resize", 256, 1, 16384));
  p.crop = static_cast<int>(options.get_int("crop", std::min(224, p.resize), 1, 16384));
  D5_CHECK_ARG(p.crop <= p.resize, "dataset '{}': crop={} must not exceed resize={}", name, p.crop, p.resize);
  const std::string norm = options.get_string("normalize", "none");
  D5_CHECK_ARG(norm == "none" || norm == "imagenet", "dataset '{}': normalize must be 'none' or 'imagenet', got '{}'",
               name, norm);
  p.imagenet_normalize = norm == "imagenet";
  return p;
}

int thread_option(const data::DatasetOptions& options) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(options.get_int("threads", hw, 1, 1024));
}

std::map<std::string, TensorDesc> image_sample_descs(const ImagePreprocess& p) {
  return {{kDataInput, TensorDesc{DType::f32, Shape{3, p.crop, p.crop}, Layout::any}},
          {kDataLabels, TensorDesc{DType::i64, Shape{}, Layout::any}}};
}

Batch decode_batch(WorkerPool& pool, const ImagePreprocess& p, int64_t n,
                   const std::function<int64_t(int64_t, float*)>& load) {
  Tensor input = Tensor::uninitialized(TensorDesc{DType::f32, Shape{n, 3, p.crop, p.crop}, Layout::any});
  Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n}, Layout::any});
  float* x = input.data_as<float>();
  int64_t* y = labels.data_as<int64_t>();
  const int64_t per = 3 * int64_t{p.crop} * p.crop;
  pool.parallel_for(n, [&](int64_t i) { y[i] = load(i, x + i * per); });
  return {{kDataInput, std::move(input)}, {kDataLabels, std::move(labels)}};
}

WorkerPool::WorkerPool(int threads) {
  D5_CHECK_ARG(threads >= 1, "a worker pool needs at least one thread, got {}", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Takes indices until none are left; records the first exception and stops handing out more.
void WorkerPool::drain() {
  for (;;) {
    int64_t i = 0;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= n_) return;
      i = next_++;
    }
    try {
      (*fn_)(i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_ = n_;
    }
  }
}

void WorkerPool::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    drain();
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_cv_.notify_all();
  }
}

void WorkerPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard call(call_mutex_);
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  drain();
  std::exception_ptr error;
  {
    // Workers that woke late find no indices left and finish at once; wait for the busy ones.
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace d5::images
