#include <map>
#include <mutex>

#include "deep500/spi/fused_update.h"

namespace d5 {
namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<DeviceKind, std::shared_ptr<FusedUpdates>>& registry() {
  static std::map<DeviceKind, std::shared_ptr<FusedUpdates>> r;
  return r;
}
}  // namespace

void register_fused_updates(DeviceKind kind, std::shared_ptr<FusedUpdates> updates) {
  std::lock_guard lock(registry_mutex());
  registry()[kind] = std::move(updates);
}

FusedUpdates* fused_updates_for(DeviceKind kind) {
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(kind);
  return it == registry().end() ? nullptr : it->second.get();
}

}  // namespace d5
