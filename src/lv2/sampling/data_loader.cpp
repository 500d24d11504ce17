// The data loader: sampler -> fetch -> transforms, with background prefetch
// (include/deep500/train/data_loader.h, docs/data-loader.md).
#include "deep500/train/data_loader.h"

#include <cstring>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/metrics/timer.h"

namespace d5 {

namespace {
double seconds_since(int64_t start_ns) { return static_cast<double>(wall_now_ns() - start_ns) * 1e-9; }
}  // namespace

DataLoader::DataLoader(const Dataset& dataset, std::unique_ptr<Sampler> sampler, DataLoaderOptions options,
                       std::vector<std::shared_ptr<const BatchTransform>> transforms)
    : dataset_(dataset), sampler_(std::move(sampler)), options_(options), transforms_(std::move(transforms)) {
  D5_CHECK_ARG(sampler_ != nullptr, "data loader: no sampler given");
  D5_CHECK_ARG(sampler_->dataset_size() == dataset_.size(),
               "data loader: the {} sampler covers {} samples but dataset '{}' has {}", sampler_->name(),
               sampler_->dataset_size(), dataset_.name(), dataset_.size());
  D5_CHECK_ARG(options_.prefetch >= 0, "data loader: prefetch must be >= 0 batches, got {}", options_.prefetch);
  D5_CHECK_ARG(options_.workers >= 1 && options_.workers <= 256, "data loader: workers must be in [1, 256], got {}",
               options_.workers);
  for (const auto& t : transforms_) D5_CHECK_ARG(t != nullptr, "data loader: null transform");
  consumer_state_ = sampler_->state();
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

namespace {

// The batch's tensor `name` replaced by a copy on `device`, through the device's staging memory
// where it has some (the copy then runs beside the device's compute), else a plain copy.
void place_on_device(Batch& batch, const std::string& name, Device device) {
  auto it = batch.find(name);
  if (it == batch.end() || it->second.device() == device) return;
  const Tensor& host = it->second;
  D5_CHECK_ARG(host.on_host(), "batch tensor '{}' is on {}, not on the host: the loader copies host tensors to {}",
               name, host.device().to_string(), device.to_string());
  DeviceAllocator& a = allocator_for(device);
  Tensor out = Tensor::uninitialized(host.desc(), device);
  const size_t bytes = host.bytes();
  if (std::shared_ptr<void> staging = bytes > 0 ? a.allocate_staging(bytes, device.index) : nullptr) {
    std::memcpy(staging.get(), host.data(), bytes);
    a.copy_from_staging(out.data(), staging.get(), bytes, device.index);
  } else if (bytes > 0) {
    a.copy_from_host(out.data(), host.data(), bytes, device.index);
    a.synchronize(device.index);
  }
  it->second = std::move(out);
}

}  // namespace

void DataLoader::produce(Item& item) const {
  try {
    const int64_t t0 = wall_now_ns();
    Batch batch = dataset_.fetch(item.indices);
    item.fetch_s = seconds_since(t0);
    const int64_t t1 = wall_now_ns();
    for (const auto& t : transforms_) t->apply(batch, item.indices, item.epoch);
    item.transform_s = seconds_since(t1);
    if (!options_.devices.empty()) {
      const int64_t t2 = wall_now_ns();
      for (const auto& [name, device] : options_.devices) place_on_device(batch, name, device);
      item.copy_s = seconds_since(t2);
    }
    item.batch = std::move(batch);
  } catch (...) {
    item.error = std::current_exception();
  }
}

DataLoader::Item DataLoader::draw() {
  Item item;
  try {
    item.indices = sampler_->next();
  } catch (...) {
    item.error = std::current_exception();
  }
  item.state_after = sampler_->state();
  item.epoch = sampler_->epoch();
  return item;
}

std::optional<Batch> DataLoader::hand_out(Item item, double wait_s) {
  consumer_state_ = item.state_after;
  if (!item.batch && !item.error) {
    at_epoch_end_ = true;
    return std::nullopt;
  }
  last_indices_ = std::move(item.indices);
  timings_.push_back(BatchTiming{item.fetch_s, item.transform_s, item.copy_s,
                                 item.fetch_s + item.transform_s + item.copy_s, wait_s});
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.batch);
}

std::optional<Batch> DataLoader::next_synchronous() {
  const int64_t t0 = wall_now_ns();
  Item item = draw();
  if (!item.indices.empty()) produce(item);
  return hand_out(std::move(item), seconds_since(t0));
}

std::optional<Batch> DataLoader::next() {
  if (at_epoch_end_) return std::nullopt;
  if (options_.prefetch == 0) return next_synchronous();
  // The wait starts before the workers do: the first batch's wait includes their start.
  const int64_t t0 = wall_now_ns();
  if (workers_.empty()) start_workers();
  Item item;
  {
    std::unique_lock lock(mutex_);
    ready_cv_.wait(lock, [&] { return ready_.count(handed_) > 0; });
    auto node = ready_.extract(handed_);
    item = std::move(node.mapped());
    ++handed_;
  }
  work_cv_.notify_one();
  return hand_out(std::move(item), seconds_since(t0));
}

void DataLoader::start_workers() {
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || (!epoch_drawn_ && drawn_ - handed_ < options_.prefetch); });
    if (stop_) return;
    const uint64_t generation = generation_;
    const int64_t seq = drawn_++;
    // Drawing happens under the lock: samplers are not thread-safe, and draw order is what
    // fixes batch order.
    Item item = draw();
    if (item.indices.empty()) {
      // The end of the epoch (or a sampler error): nothing to fetch.
      if (!item.error) epoch_drawn_ = true;
    } else {
      lock.unlock();
      produce(item);
      lock.lock();
      if (generation != generation_) continue;  // restored or moved to a new epoch meanwhile
    }
    ready_.emplace(seq, std::move(item));
    ready_cv_.notify_all();
  }
}

void DataLoader::discard_prefetched() {
  ++generation_;
  ready_.clear();
  drawn_ = 0;
  handed_ = 0;
  epoch_drawn_ = false;
}

void DataLoader::start_next_epoch() {
  {
    std::lock_guard lock(mutex_);
    discard_prefetched();
    // Workers never draw past the end of an epoch, so the sampler is still in the consumer's
    // epoch here and reset() moves both to the next one.
    sampler_->reset();
    consumer_state_ = sampler_->state();
  }
  at_epoch_end_ = false;
  work_cv_.notify_all();
}

void DataLoader::restore(const SamplerState& state) {
  {
    std::lock_guard lock(mutex_);
    sampler_->restore(state);  // throws, changing nothing, for a position the sampler refuses
    discard_prefetched();
    consumer_state_ = state;
  }
  at_epoch_end_ = false;
  work_cv_.notify_all();
}

int64_t DataLoader::batches_per_epoch() {
  std::lock_guard lock(mutex_);
  return sampler_->batches_per_epoch();
}

}  // namespace d5
