#include "deep500/core/device_allocator.h"

#include <cstring>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/tensor.h"
#include "host_storage.h"

namespace d5 {

namespace {

class HostAllocator final : public DeviceAllocator {
 public:
  std::string kind_name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  std::shared_ptr<void> allocate(size_t bytes, int32_t) override { return detail::allocate_host_storage(bytes); }
  void zero(void* data, size_t bytes, int32_t) override { std::memset(data, 0, bytes); }
  void copy_to_host(void* host, const void* device, size_t bytes, int32_t) override {
    std::memcpy(host, device, bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes, int32_t) override {
    std::memcpy(device, host, bytes);
  }
  DeviceMemoryStats stats(int32_t) const override { return detail::host_storage_stats(); }
  void reset_peak(int32_t) override { reset_tensor_peak_memory(); }
};

// Kinds by value; never destroyed, so that tensors in static objects can still free their memory.
struct KindTable {
  std::mutex mutex;
  std::vector<std::shared_ptr<DeviceAllocator>> allocators;
  KindTable() {
    allocators.push_back(std::make_shared<HostAllocator>());
    allocators.push_back(nullptr);  // cuda: registered by the CUDA backend
  }
};
KindTable& kinds() {
  static auto* table = new KindTable;
  return *table;
}

std::string known_kinds(const KindTable& t) {
  std::string s;
  for (const auto& a : t.allocators)
    if (a) s += (s.empty() ? "" : ", ") + a->kind_name();
  return s;
}

}  // namespace

DeviceKind register_device_kind(std::shared_ptr<DeviceAllocator> allocator) {
  D5_CHECK_ARG(allocator != nullptr, "register_device_kind: no allocator given");
  KindTable& t = kinds();
  std::lock_guard lock(t.mutex);
  const std::string name = allocator->kind_name();
  D5_CHECK_ARG(name != "cpu", "register_device_kind: the host allocator cannot be replaced");
  size_t slot = t.allocators.size();
  if (name == "cuda") slot = static_cast<size_t>(DeviceKind::cuda);
  for (size_t k = 0; k < t.allocators.size(); ++k)
    if (t.allocators[k] && t.allocators[k]->kind_name() == name) slot = k;
  if (slot == t.allocators.size()) t.allocators.push_back(nullptr);
  t.allocators[slot] = std::move(allocator);
  return static_cast<DeviceKind>(slot);
}

DeviceAllocator& allocator_for(Device d) {
  KindTable& t = kinds();
  std::lock_guard lock(t.mutex);
  const auto k = static_cast<size_t>(d.kind);
  if (k < t.allocators.size() && t.allocators[k]) return *t.allocators[k];
  D5_THROW(InvalidArgument, "no allocator for device kind {} (known: {}); {}", static_cast<int>(d.kind),
           known_kinds(t),
           d.kind == DeviceKind::cuda ? "cuda memory needs the cuda backend built and a CUDA device"
                                      : "the kind's provider registers it (register_device_kind)");
}

bool is_registered(DeviceKind kind) {
  KindTable& t = kinds();
  std::lock_guard lock(t.mutex);
  const auto k = static_cast<size_t>(kind);
  return k < t.allocators.size() && t.allocators[k] != nullptr;
}

bool host_accessible(Device d) {
  // Memory of a kind no allocator was registered for (a GPU tensor arriving through DLPack in a
  // build without that backend) is nothing host code may assume it can read.
  return d.kind == DeviceKind::cpu || (is_registered(d.kind) && allocator_for(d).host_accessible());
}

DeviceKind device_kind_named(const std::string& name) {
  KindTable& t = kinds();
  std::lock_guard lock(t.mutex);
  for (size_t k = 0; k < t.allocators.size(); ++k)
    if (t.allocators[k] && t.allocators[k]->kind_name() == name) return static_cast<DeviceKind>(k);
  if (name == "cuda") return DeviceKind::cuda;  // named before its backend registers it
  D5_THROW(InvalidArgument, "unknown device kind '{}' (known: {})", name, known_kinds(t));
}

Device parse_device(const std::string& text) {
  const auto colon = text.find(':');
  Device d;
  d.kind = device_kind_named(text.substr(0, colon));
  if (colon != std::string::npos) {
    const std::string index = text.substr(colon + 1);
    D5_CHECK_ARG(!index.empty() && index.size() < 6 && index.find_first_not_of("0123456789") == std::string::npos,
                 "device '{}': the index after ':' must be a number", text);
    d.index = std::stoi(index);
  }
  return d;
}

std::string Device::to_string() const {
  if (kind == DeviceKind::cpu) return "cpu";
  if (kind == DeviceKind::cuda) return fmt::format("cuda:{}", index);
  KindTable& t = kinds();
  std::lock_guard lock(t.mutex);
  const auto k = static_cast<size_t>(kind);
  if (k < t.allocators.size() && t.allocators[k]) return fmt::format("{}:{}", t.allocators[k]->kind_name(), index);
  return fmt::format("device-kind-{}:{}", static_cast<int>(kind), index);
}

void copy_between_devices(void* dst, Device to, const void* src, Device from, size_t bytes) {
  if (bytes == 0) return;
  DeviceAllocator& a_from = allocator_for(from);
  DeviceAllocator& a_to = allocator_for(to);
  if (from == to && !a_to.host_accessible() && a_to.copy_within(dst, src, bytes, to.index)) return;
  if (a_to.host_accessible()) {
    a_from.copy_to_host(dst, src, bytes, from.index);
    a_from.synchronize(from.index);
  } else if (a_from.host_accessible()) {
    a_to.copy_from_host(dst, src, bytes, to.index);
    a_to.synchronize(to.index);
  } else {
    // Device to device of different kinds (or without a peer path): through the host.
    std::shared_ptr<void> staging = detail::allocate_host_storage(bytes);
    a_from.copy_to_host(staging.get(), src, bytes, from.index);
    a_from.synchronize(from.index);
    a_to.copy_from_host(dst, staging.get(), bytes, to.index);
    a_to.synchronize(to.index);
  }
}

size_t CachingDeviceAllocator::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{1} << 20;
  if (bytes <= kLarge) return std::max(kSmall, (bytes + kSmall - 1) / kSmall * kSmall);
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

// From the calling thread's pool when it uses one for this device (allocation_pool.cpp), else
// from the shared cache; then from the device.
std::shared_ptr<void> CachingDeviceAllocator::allocate(size_t bytes, int32_t index) {
  std::shared_ptr<AllocationPool> pool = active_pool(this, index);
  const size_t cls = size_class(bytes);
  void* block = nullptr;
  {
    std::lock_guard lock(mutex_);
    PerDevice& d = devices_[index];
    auto& free_list = pool ? pool->free_[cls] : d.cached[cls];
    if (!free_list.empty()) {
      block = free_list.back();
      free_list.pop_back();
      ++d.stats.cache_hits;
    }
  }
  if (!block) {
    block = allocate_from_device(cls, index);
    if (!block)
      throw IoError(fmt::format("out of {} memory allocating {} bytes", kind_name(), bytes));
    std::lock_guard lock(mutex_);
    devices_[index].stats.reserved_bytes += static_cast<int64_t>(cls);
  }
  {
    std::lock_guard lock(mutex_);
    DeviceMemoryStats& s = devices_[index].stats;
    s.allocated_bytes += static_cast<int64_t>(cls);
    s.peak_bytes = std::max(s.peak_bytes, s.allocated_bytes);
    ++s.allocations;
  }
  // A pool's block holds its pool: the pool outlives every block it handed out.
  if (pool)
    return std::shared_ptr<void>(block, [pool = std::move(pool), cls](void* p) {
      pool->owner_->give_back_to_pool(*pool, p, cls);
    });
  auto self = std::static_pointer_cast<CachingDeviceAllocator>(shared_from_this());
  return std::shared_ptr<void>(block, [self, cls, index](void* p) { self->give_back(p, cls, index); });
}

// A device that refuses a block may only be short because blocks of other sizes wait in the
// cache: those go back to it, and the allocation is tried once more before it fails.
void* CachingDeviceAllocator::allocate_from_device(size_t cls, int32_t index) {
  const auto cached_bytes = [&] {
    std::lock_guard lock(mutex_);
    const DeviceMemoryStats& s = devices_[index].stats;
    return s.reserved_bytes - s.allocated_bytes;
  };
  try {
    if (void* p = raw_allocate(cls, index)) return p;
  } catch (const Error&) {
    if (cached_bytes() == 0) throw;
  }
  if (cached_bytes() == 0) return nullptr;
  release_cached(index);
  return raw_allocate(cls, index);
}

void CachingDeviceAllocator::give_back(void* data, size_t cls, int32_t index) {
  std::lock_guard lock(mutex_);
  PerDevice& d = devices_[index];
  d.stats.allocated_bytes -= static_cast<int64_t>(cls);
  d.cached[cls].push_back(data);
}

DeviceMemoryStats CachingDeviceAllocator::stats(int32_t index) const {
  std::lock_guard lock(mutex_);
  auto it = devices_.find(index);
  return it == devices_.end() ? DeviceMemoryStats{} : it->second.stats;
}

void CachingDeviceAllocator::reset_peak(int32_t index) {
  std::lock_guard lock(mutex_);
  DeviceMemoryStats& s = devices_[index].stats;
  s.peak_bytes = s.allocated_bytes;
}

void CachingDeviceAllocator::release_cached(int32_t index) {
  std::lock_guard lock(mutex_);
  PerDevice& d = devices_[index];
  for (auto& [cls, blocks] : d.cached) {
    for (void* b : blocks) raw_free(b, index);
    d.stats.reserved_bytes -= static_cast<int64_t>(cls * blocks.size());
    blocks.clear();
  }
}

// Blocks still handed out keep the allocator alive, so only cached blocks remain here. raw_free
// is virtual and the derived part is gone by now: derived allocators call release_cached for
// every index in their own destructor; whatever is left is leaked rather than freed wrongly.
CachingDeviceAllocator::~CachingDeviceAllocator() = default;

}  // namespace d5
