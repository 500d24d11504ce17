#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/registry.h"

#include <algorithm>
#include <string_view>

namespace d5 {

namespace {
Registry<BackendInfo>& registry() {
  static Registry<BackendInfo> r("backend");
  return r;
}
}  // namespace

void register_backend(BackendInfo info) {
  std::string name = info.name, description = info.description;
  registry().add(std::move(name), std::move(description), std::move(info));
}

std::vector<BackendInfo> backends() {
  std::vector<BackendInfo> out;
  for (const auto& v : registry().values()) out.push_back(*v);
  return out;
}

std::shared_ptr<const BackendInfo> find_backend(const std::string& name) { return registry().find(name); }

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

std::vector<std::string> not_built_backends() {
  std::vector<std::string> out;
  std::string_view rest = build_info().not_built_backends;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

bool is_not_built_backend(const std::string& name) {
  const auto names = not_built_backends();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string not_built_list() {
  const auto names = not_built_backends();
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace d5
