#pragma once
// "testmem": a device whose memory is host memory that host code is told it may not touch, so
// that every path a GPU takes (device allocation, caching, copies each way, refusals of host
// access, an executor's transfers at device boundaries) runs on machines without one. Only tests
// register it.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "deep500/core/device_allocator.h"

namespace d5::test {

class FixedTimer final : public DeviceTimer {
 public:
  explicit FixedTimer(double seconds) : seconds_(seconds) {}
  void start() override { state_ = 1; }
  void stop() override {
    if (state_ != 1) throw std::logic_error("FixedTimer stopped before it was started");
    state_ = 2;
  }
  double seconds() override {
    if (state_ != 2) throw std::logic_error("FixedTimer read before it was stopped");
    return seconds_;
  }

 private:
  double seconds_;
  int state_ = 0;
};

class TestMemoryAllocator : public CachingDeviceAllocator {
 public:
  explicit TestMemoryAllocator(std::string name) : name_(std::move(name)) {}
  ~TestMemoryAllocator() override { release_cached(0), release_cached(1); }
  std::string kind_name() const override { return name_; }
  bool host_accessible() const override { return false; }
  void zero(void* data, size_t bytes, int32_t) override { std::memset(data, 0, bytes); }
  void copy_to_host(void* host, const void* device, size_t bytes, int32_t) override {
    std::memcpy(host, device, bytes);
    ++copies_to_host;
  }
  void copy_from_host(void* device, const void* host, size_t bytes, int32_t) override {
    std::memcpy(device, host, bytes);
    ++copies_from_host;
  }
  void synchronize(int32_t) override { ++synchronizations; }
  // Copies within the device without the host (off unless a test turns them on), counted.
  bool device_copies = false;
  int copies_within = 0;
  bool copy_within(void* dst, const void* src, size_t bytes, int32_t) override {
    if (!device_copies) return false;
    std::memmove(dst, src, bytes);
    ++copies_within;
    return true;
  }
  int raw_allocations = 0, copies_to_host = 0, copies_from_host = 0, synchronizations = 0;
  // Staging memory (off unless a test turns it on, as for a device without any): host blocks
  // this allocator hands out and copies from, counted; a staged copy from memory it did not hand
  // out fails the test. Atomic: a data loader's workers stage from their threads.
  bool staging = false;
  std::atomic<int> staging_buffers{0}, staged_copies{0};
  std::shared_ptr<void> allocate_staging(size_t bytes, int32_t) override {
    if (!staging) return nullptr;
    ++staging_buffers;
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    {
      std::lock_guard lock(staging_mutex_);
      staging_blocks_.insert(p);
    }
    return std::shared_ptr<void>(p, [this](void* q) {
      std::lock_guard lock(staging_mutex_);
      staging_blocks_.erase(q);
      std::free(q);
    });
  }
  void copy_from_staging(void* device, const void* staging_memory, size_t bytes, int32_t) override {
    {
      std::lock_guard lock(staging_mutex_);
      if (!staging_blocks_.count(const_cast<void*>(staging_memory)))
        throw std::logic_error("a staged copy from memory allocate_staging did not hand out");
    }
    std::memcpy(device, staging_memory, bytes);
    ++staged_copies;
  }
  // A device clock for the tests that set one (0: none, as the host has none): every timing
  // reads exactly timer_seconds, and reading one that was not started and stopped fails the test.
  double timer_seconds = 0;
  int timers_made = 0;
  std::unique_ptr<DeviceTimer> make_timer(int32_t) override {
    if (timer_seconds <= 0) return nullptr;
    ++timers_made;
    return std::make_unique<FixedTimer>(timer_seconds);
  }
  // Bytes the "device" has: a raw allocation beyond it fails as a full GPU's would.
  size_t capacity = SIZE_MAX, raw_bytes = 0;

 protected:
  void* raw_allocate(size_t bytes, int32_t) override {
    std::lock_guard lock(raw_mutex_);
    if (raw_bytes + bytes > capacity) return nullptr;
    ++raw_allocations;
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    sizes_[p] = bytes;
    raw_bytes += bytes;
    return p;
  }
  void raw_free(void* data, int32_t) override {
    std::lock_guard lock(raw_mutex_);
    raw_bytes -= sizes_[data];
    sizes_.erase(data);
    std::free(data);
  }

 private:
  std::string name_;
  std::map<void*, size_t> sizes_;
  std::mutex raw_mutex_;  // loader workers allocate device tensors from their threads
  std::mutex staging_mutex_;
  std::set<void*> staging_blocks_;
};

// The allocator of kind `name` (registered on first use) and device `name`:index.
inline std::shared_ptr<TestMemoryAllocator> test_memory_allocator(const std::string& name = "testmem") {
  static std::map<std::string, std::shared_ptr<TestMemoryAllocator>> allocators;
  auto& a = allocators[name];
  if (!a) {
    a = std::make_shared<TestMemoryAllocator>(name);
    register_device_kind(a);
  }
  return a;
}
inline Device test_memory_device(int32_t index = 0, const std::string& name = "testmem") {
  test_memory_allocator(name);
  return Device{device_kind_named(name), index};
}

}  // namespace d5::test
