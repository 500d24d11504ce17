#include "deep500/core/device.h"

namespace d5 {

namespace {
GpuEnumerator g_enumerator = nullptr;
}

void set_gpu_enumerator(GpuEnumerator e) { g_enumerator = e; }

std::vector<GpuInfo> gpu_info(std::string* unavailable_reason) {
  if (!g_enumerator) {
    if (unavailable_reason) *unavailable_reason = "this build has no CUDA backend (D5_WITH_CUDA)";
    return {};
  }
  return g_enumerator(unavailable_reason);
}

}  // namespace d5
