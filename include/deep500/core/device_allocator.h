#pragma once
// Where tensor storage comes from, per device kind (docs/devices.md).
//
// Every device kind has one allocator: the host's hands out 64-byte-aligned memory under the
// --malloc policy; a device's (CUDA, or the host-memory device the tests register) is a caching
// allocator that keeps freed blocks for reuse, as a GPU framework must, because its raw
// allocation synchronises the device. Copies between devices go through the allocators of both
// ends; host code may only dereference memory of a kind whose allocator says it is host
// accessible, and Tensor's element access refuses any other with InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/core/device_sensors.h"

namespace d5 {

struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // obtained from the device: allocated plus cached for reuse
  int64_t peak_bytes = 0;       // high-water mark of allocated_bytes
  int64_t allocations = 0;      // tensors allocated
  int64_t cache_hits = 0;       // of them, served from a cached block
};

// Times work on a device with the device's own clock (CUDA events on its stream): start() before
// the work is queued, stop() after it; seconds() waits for the work and returns the device's time
// between the two, without the host's launch and synchronisation costs.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;
};

// Blocks handed out keep their allocator alive (shared_from_this), whatever order owners go in.
class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  virtual ~DeviceAllocator() = default;
  // "cpu", "cuda", ...: the name a Device of this kind prints as ("cuda:0").
  virtual std::string kind_name() const = 0;
  // Whether host code may read and write this memory directly.
  virtual bool host_accessible() const = 0;
  // At least `bytes` (0 allowed), 64-byte aligned, released when the last owner goes.
  virtual std::shared_ptr<void> allocate(size_t bytes, int32_t index) = 0;
  virtual void zero(void* data, size_t bytes, int32_t index) = 0;
  // Between this device's memory and host memory; ordered after earlier work on the device's
  // stream (a device with streams may return before the copy ends: synchronize() waits).
  virtual void copy_to_host(void* host, const void* device, size_t bytes, int32_t index) = 0;
  virtual void copy_from_host(void* device, const void* host, size_t bytes, int32_t index) = 0;
  virtual void synchronize(int32_t /*index*/) {}
  // For a data pipeline that fills device tensors while the device computes (the data loader's
  // device batches, docs/data-loader.md#device-batches): host memory the device copies from
  // without staging it again (page-locked for CUDA), at least `bytes`, host accessible, from a
  // cache of its own; nullptr when this kind has none (then copy_from_host serves).
  virtual std::shared_ptr<void> allocate_staging(size_t /*bytes*/, int32_t /*index*/) { return nullptr; }
  // Copies `bytes` from `staging` (allocate_staging's memory) to `device` on a copy queue beside
  // the compute stream, ordered after the compute work queued so far (which may still read memory
  // `device` was reused from), and returns once the copy ended: a worker thread waits, the
  // compute stream does not. Any thread.
  virtual void copy_from_staging(void* device, const void* staging, size_t bytes, int32_t index) {
    copy_from_host(device, staging, bytes, index);
  }
  // Copies `bytes` between two buffers of this device without the host, ordered like the other
  // copies, and returns once it ended (while the device's work is being recorded, once it is
  // recorded); false when this kind has no such copy (copy_between_devices then stages through
  // the host).
  virtual bool copy_within(void* /*dst*/, const void* /*src*/, size_t /*bytes*/, int32_t /*index*/) { return false; }
  // A timer on this device's stream; nullptr when the device has no clock of its own (the host).
  virtual std::unique_ptr<DeviceTimer> make_timer(int32_t /*index*/) { return nullptr; }
  // Evicts the device's caches (overwrites a buffer larger than its last-level cache), so that the
  // next timed run reads its operands from memory as a run in a real workload would; false when
  // the device has no cache to flush.
  virtual bool flush_caches(int32_t /*index*/) { return false; }
  // The driver's counters of device `index` (energy, clocks, throttling, utilization), or null
  // with the reason when this kind has none or they cannot be read.
  virtual std::shared_ptr<const DeviceSensors> sensors(int32_t /*index*/, std::string* reason) const {
    if (reason) *reason = "device kind '" + kind_name() + "' has no sensors";
    return nullptr;
  }
  virtual DeviceMemoryStats stats(int32_t index) const = 0;
  virtual void reset_peak(int32_t index) = 0;
};

// A kind's allocator, set once by whoever provides the kind (the core for cpu, the CUDA backend,
// a test). register_device_kind returns the kind a new name gets; registering a name again
// replaces its allocator (a plugin registered twice) and keeps the kind.
DeviceKind register_device_kind(std::shared_ptr<DeviceAllocator> allocator);
// The allocator of d's kind; InvalidArgument naming the known kinds when none is registered.
DeviceAllocator& allocator_for(Device d);
bool is_registered(DeviceKind kind);
bool host_accessible(Device d);  // false for a kind nothing registered
// The kind named `name` ("cpu", "cuda"), or InvalidArgument naming the known kinds.
DeviceKind device_kind_named(const std::string& name);
// "cpu", "cuda:1", "testmem:0" into a Device (the index defaults to 0).
Device parse_device(const std::string& text);

// Copies `bytes` from src on `from` to dst on `to`: within one device by the device's own copy
// where it has one, else staging through host memory when neither end is the host. Waits for the
// copy to end.
void copy_between_devices(void* dst, Device to, const void* src, Device from, size_t bytes);

// A caching allocator over a device's raw allocation, kept in size classes (rounded up to 512
// bytes, exact above 1 MiB rounded to 1 MiB): a freed block waits in its class for the next
// request of that class. Thread-safe. release_cached() gives cached blocks back; so does a failed
// raw allocation (raw_allocate returning null or throwing) before it is retried once.
//
// A pool sets blocks aside for work that is recorded once and replayed with the same addresses (a
// CUDA graph, docs/cuda-graphs.md): while a thread uses a pool, that thread's allocations on the
// pool's device come from blocks freed into the pool, else from the device, never from the shared
// cache; and a block allocated from the pool goes back to the pool when freed, where only the
// pool's own allocations find it. So no later tensor is handed memory a replay still writes. The
// pool lives while its owner or any block allocated from it does; its free blocks then join the
// shared cache.
class CachingDeviceAllocator;

class AllocationPool {
 public:
  AllocationPool(std::shared_ptr<CachingDeviceAllocator> owner, int32_t index)
      : owner_(std::move(owner)), index_(index) {}
  ~AllocationPool();
  AllocationPool(const AllocationPool&) = delete;
  AllocationPool& operator=(const AllocationPool&) = delete;
  int32_t index() const { return index_; }

 private:
  friend class CachingDeviceAllocator;
  std::shared_ptr<CachingDeviceAllocator> owner_;
  int32_t index_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // by size class; under the owner's mutex
};

class CachingDeviceAllocator : public DeviceAllocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes, int32_t index) override;
  DeviceMemoryStats stats(int32_t index) const override;
  void reset_peak(int32_t index) override;
  void release_cached(int32_t index);
  ~CachingDeviceAllocator() override;

  // An empty pool for device `index` of this allocator.
  std::shared_ptr<AllocationPool> make_pool(int32_t index);
  // The calling thread allocates from `pool` until the scope ends (scopes nest: the previous pool
  // comes back). A pool of another allocator or device leaves those allocations alone.
  class PoolScope {
   public:
    explicit PoolScope(std::shared_ptr<AllocationPool> pool);
    ~PoolScope();
    PoolScope(const PoolScope&) = delete;
    PoolScope& operator=(const PoolScope&) = delete;

   private:
    std::shared_ptr<AllocationPool> previous_;
  };
  // Blocks waiting in `pool` for its next allocation (bytes); for tests and reports.
  int64_t pool_free_bytes(const AllocationPool& pool) const;

 protected:
  virtual void* raw_allocate(size_t bytes, int32_t index) = 0;
  virtual void raw_free(void* data, int32_t index) = 0;

 private:
  struct PerDevice {
    std::unordered_map<size_t, std::vector<void*>> cached;
    DeviceMemoryStats stats;
  };
  static size_t size_class(size_t bytes);
  void* allocate_from_device(size_t cls, int32_t index);
  void give_back(void* data, size_t cls, int32_t index);
  void give_back_to_pool(AllocationPool& pool, void* data, size_t cls);
  void take_pool_blocks(AllocationPool& pool);
  // The pool the calling thread uses for this allocator's device `index`, or null.
  static std::shared_ptr<AllocationPool> active_pool(const CachingDeviceAllocator* allocator, int32_t index);
  friend class AllocationPool;
  mutable std::mutex mutex_;
  std::unordered_map<int32_t, PerDevice> devices_;
};

}  // namespace d5
