#pragma once
// Registry of the backends ("frameworks") built into this binary.
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace d5 {

struct BackendInfo {
  std::string name;         // "reference", "torch", "onednn", "cuda"
  std::string description;  // one line
  std::string version;      // version reported by the library at run time
  bool available = true;    // built but unusable here (e.g. CUDA without a GPU) -> false
  std::string unavailable_reason;
  // Thread control; null when the backend has no pool of its own.
  std::function<void(int)> set_threads;
  std::function<int()> get_threads;
};

void register_backend(BackendInfo info);  // replaces an entry of the same name
std::vector<BackendInfo> backends();      // in registration order
std::shared_ptr<const BackendInfo> find_backend(const std::string& name);  // null when not built

}  // namespace d5
