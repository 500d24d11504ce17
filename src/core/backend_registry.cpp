#include <algorithm>

#include "deep500/core/backend.h"

namespace d5 {

namespace {
std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r;
  return r;
}
}  // namespace

void register_backend(BackendInfo info) {
  auto& r = registry();
  auto it = std::find_if(r.begin(), r.end(), [&](const auto& b) { return b.name == info.name; });
  if (it != r.end()) *it = std::move(info);
  else r.push_back(std::move(info));
}

const std::vector<BackendInfo>& backends() { return registry(); }

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : registry())
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace d5

#include "deep500/core/runtime_libraries.h"

namespace d5 {

namespace {
std::map<std::string, std::string>& runtime_registry() {
  static std::map<std::string, std::string> r;
  return r;
}
}  // namespace

void register_runtime_library(const std::string& name, const std::string& version) {
  runtime_registry()[name] = version;
}
const std::map<std::string, std::string>& runtime_libraries() { return runtime_registry(); }

}  // namespace d5
