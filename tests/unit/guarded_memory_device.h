#pragma once
// "guardmem": a device whose memory host code cannot touch at all, as a GPU's. Each block is one
// memory file mapped twice: the address tensors hold (what a device library would receive) is
// mapped PROT_NONE, so that any host read or write through it, by d5 or by a library such as MPI,
// ends the process with SIGSEGV; the allocator copies through the second, writable mapping.
// Where "testmem" (test_memory_device.h) only tells host code not to look, this one catches code
// that looks anyway. Its update rules (the built-in optimizers' FusedUpdates) run the host's
// loops on the writable mapping. Only tests register it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "deep500/core/device_allocator.h"
#include "deep500/spi/fused_update.h"
#include "test_memory_updates.h"

namespace d5::test {

class GuardedMemoryAllocator final : public CachingDeviceAllocator {
 public:
  ~GuardedMemoryAllocator() override { release_cached(0); }
  std::string kind_name() const override { return "guardmem"; }
  bool host_accessible() const override { return false; }
  void zero(void* data, size_t bytes, int32_t) override { std::memset(writable(data, bytes), 0, bytes); }
  void copy_to_host(void* host, const void* device, size_t bytes, int32_t) override {
    std::memcpy(host, writable(device, bytes), bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes, int32_t) override {
    std::memcpy(writable(device, bytes), host, bytes);
  }
  void synchronize(int32_t) override {}

  // The writable alias of `bytes` of device memory at `device`; a range outside every block is a
  // bug in the caller and throws.
  std::byte* writable(const void* device, size_t bytes) {
    std::lock_guard lock(mutex_);
    const auto* d = static_cast<const std::byte*>(device);
    auto it = blocks_.upper_bound(d);
    if (it == blocks_.begin()) throw std::out_of_range("guardmem: not device memory");
    --it;
    const auto offset = static_cast<size_t>(d - it->first);
    if (offset + bytes > it->second.bytes) throw std::out_of_range("guardmem: range beyond its block");
    return it->second.host + offset;
  }

 protected:
  void* raw_allocate(size_t bytes, int32_t) override {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t mapped = std::max<size_t>(page, (bytes + page - 1) / page * page);
    const int fd = memfd_create("d5-guardmem", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    void* host = MAP_FAILED;
    void* device = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(mapped)) == 0) {
      host = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      device = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (host == MAP_FAILED || device == MAP_FAILED) {
      if (host != MAP_FAILED) munmap(host, mapped);
      if (device != MAP_FAILED) munmap(device, mapped);
      return nullptr;
    }
    std::lock_guard lock(mutex_);
    blocks_[static_cast<std::byte*>(device)] = {static_cast<std::byte*>(host), mapped};
    return device;
  }
  void raw_free(void* data, int32_t) override {
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(static_cast<std::byte*>(data));
    if (it == blocks_.end()) return;
    munmap(it->second.host, it->second.bytes);
    munmap(it->first, it->second.bytes);
    blocks_.erase(it);
  }

 private:
  struct Block {
    std::byte* host;
    size_t bytes;
  };
  std::map<std::byte*, Block, std::less<>> blocks_;
  std::mutex mutex_;
};

// The built-in update rules on guardmem: each record's buffers translated to their writable
// aliases, then the host's element loops.
class GuardedMemoryUpdates final : public FusedUpdates {
 public:
  explicit GuardedMemoryUpdates(std::shared_ptr<GuardedMemoryAllocator> memory) : memory_(std::move(memory)) {}
  void apply(int32_t, std::span<const FusedUpdate> updates) override {
    for (FusedUpdate u : updates) {
      const size_t bytes = static_cast<size_t>(u.n) * sizeof(float);
      if (u.g != nullptr) u.g = as_floats(u.g, bytes);
      u.p = as_floats(u.p, bytes);
      for (float*& s : u.state) {
        if (s != nullptr) s = as_floats(s, bytes);
      }
      apply_update_on_host(u);
    }
  }
  std::vector<double> squared_norms(int32_t, std::span<const float* const> tensors,
                                    std::span<const int64_t> sizes) override {
    std::vector<const float*> readable;
    for (size_t i = 0; i < tensors.size(); ++i)
      readable.push_back(as_floats(tensors[i], static_cast<size_t>(sizes[i]) * sizeof(float)));
    return squared_norms_on_host(readable, sizes);
  }

 private:
  float* as_floats(const float* device, size_t bytes) {
    return reinterpret_cast<float*>(memory_->writable(device, bytes));
  }
  std::shared_ptr<GuardedMemoryAllocator> memory_;
};

// guardmem's allocator, its kind and update rules registered on first use.
inline GuardedMemoryAllocator& guarded_memory() {
  static const std::shared_ptr<GuardedMemoryAllocator> memory = [] {
    auto m = std::make_shared<GuardedMemoryAllocator>();
    register_device_kind(m);
    register_fused_updates(device_kind_named("guardmem"), std::make_shared<GuardedMemoryUpdates>(m));
    return m;
  }();
  return *memory;
}

// Device guardmem:index.
inline Device guarded_memory_device(int32_t index = 0) {
  guarded_memory();
  static const DeviceKind kind = device_kind_named("guardmem");
  return Device{kind, index};
}

}  // namespace d5::test
