// One GPU per local rank through CUDA_VISIBLE_DEVICES (include/deep500/core/gpu_binding.h).
#include "deep500/core/gpu_binding.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

std::string g_binding;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// The launchers' names for a process's rank among those on its node.
std::optional<int> launcher_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const auto v = env(name);
    if (!v) continue;
    char* end = nullptr;
    const long r = std::strtol(v->c_str(), &end, 10);
    if (end != v->c_str() && *end == '\0' && r >= 0) return static_cast<int>(r);
  }
  return std::nullopt;
}

int driver_gpu_count() {
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    if (e.is_directory(ec)) ++n;
  }
  return n;
}

}  // namespace

std::optional<std::string> visible_gpu_for_local_rank(const GpuBindingInput& in) {
  D5_CHECK_ARG(in.mode == "local-rank" || in.mode == "off",
               "D5_GPU_BINDING is 'local-rank' (one GPU per rank of a node, the default) or 'off', not '{}'",
               in.mode);
  if (in.mode == "off" || !in.local_rank) return std::nullopt;
  const int r = *in.local_rank;
  if (in.visible) {
    const auto list = split_list(*in.visible);
    if (list.size() < 2) return std::nullopt;
    return list[static_cast<size_t>(r) % list.size()];
  }
  if (in.gpu_count < 2) return std::nullopt;
  return std::to_string(r % in.gpu_count);
}

std::string bind_gpu_to_local_rank() {
  GpuBindingInput in;
  in.local_rank = launcher_local_rank();
  in.visible = env("CUDA_VISIBLE_DEVICES");
  in.mode = env("D5_GPU_BINDING").value_or("local-rank");
  if (in.local_rank && !in.visible && in.mode == "local-rank") in.gpu_count = driver_gpu_count();
  const auto chosen = visible_gpu_for_local_rank(in);
  if (!chosen) return g_binding = "";
  const std::string from = in.visible ? fmt::format("CUDA_VISIBLE_DEVICES={}", *in.visible)
                                      : fmt::format("{} GPUs in the driver", in.gpu_count);
  setenv("CUDA_VISIBLE_DEVICES", chosen->c_str(), 1);
  return g_binding = fmt::format("local rank {} -> CUDA_VISIBLE_DEVICES={} (from {})", *in.local_rank, *chosen, from);
}

const std::string& gpu_binding() { return g_binding; }

}  // namespace d5
