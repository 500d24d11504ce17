#include "deep500/net/framework_memory.h"

#include <map>
#include <mutex>

namespace d5 {
namespace {

struct Probes {
  std::mutex mutex;
  std::map<std::string, FrameworkMemoryProbe> by_executor;
};

Probes& probes() {
  static Probes p;
  return p;
}

}  // namespace

void register_framework_memory_probe(const std::string& executor, FrameworkMemoryProbe probe) {
  auto& p = probes();
  std::lock_guard lock(p.mutex);
  p.by_executor[executor] = std::move(probe);
}

const FrameworkMemoryProbe* framework_memory_probe(const std::string& executor) {
  auto& p = probes();
  std::lock_guard lock(p.mutex);
  const auto it = p.by_executor.find(executor);
  return it == p.by_executor.end() ? nullptr : &it->second;  // entries are never erased
}

}  // namespace d5
