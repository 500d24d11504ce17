// CachingDeviceAllocator's pools (device_allocator.h): the blocks a recorded device step was
// given stay out of the shared cache while the recording or any of those blocks lives.
#include <utility>

#include "deep500/core/device_allocator.h"

namespace d5 {

namespace {
// One pool per thread at a time: recording is one thread's affair, and a data loader's worker
// allocating beside it must not take the recording's blocks.
thread_local std::shared_ptr<AllocationPool> t_active_pool;
}  // namespace

AllocationPool::~AllocationPool() {
  if (owner_) owner_->take_pool_blocks(*this);
}

std::shared_ptr<AllocationPool> CachingDeviceAllocator::make_pool(int32_t index) {
  return std::make_shared<AllocationPool>(std::static_pointer_cast<CachingDeviceAllocator>(shared_from_this()), index);
}

CachingDeviceAllocator::PoolScope::PoolScope(std::shared_ptr<AllocationPool> pool)
    : previous_(std::exchange(t_active_pool, std::move(pool))) {}

CachingDeviceAllocator::PoolScope::~PoolScope() { t_active_pool = std::move(previous_); }

std::shared_ptr<AllocationPool> CachingDeviceAllocator::active_pool(const CachingDeviceAllocator* allocator,
                                                                    int32_t index) {
  const std::shared_ptr<AllocationPool>& p = t_active_pool;
  if (p && p->owner_.get() == allocator && p->index_ == index) return p;
  return nullptr;
}

void CachingDeviceAllocator::give_back_to_pool(AllocationPool& pool, void* data, size_t cls) {
  std::lock_guard lock(mutex_);
  devices_[pool.index_].stats.allocated_bytes -= static_cast<int64_t>(cls);
  pool.free_[cls].push_back(data);
}

void CachingDeviceAllocator::take_pool_blocks(AllocationPool& pool) {
  std::lock_guard lock(mutex_);
  PerDevice& d = devices_[pool.index_];
  for (auto& [cls, blocks] : pool.free_) {
    auto& shared = d.cached[cls];
    shared.insert(shared.end(), blocks.begin(), blocks.end());
    blocks.clear();
  }
}

int64_t CachingDeviceAllocator::pool_free_bytes(const AllocationPool& pool) const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [cls, blocks] : pool.free_) bytes += static_cast<int64_t>(cls * blocks.size());
  return bytes;
}

}  // namespace d5
