#pragma once
// Device memory that a framework allocates itself, outside d5's device allocators. The torch
// executor on a GPU keeps parameters, gradients and feeds in d5 tensors (d5's allocator:
// device_peak_bytes), but ATen allocates its activations and results in LibTorch's caching
// allocator, which d5's never sees. A backend registers a probe of that allocator for its
// executor; d5 net reports its high-water mark beside d5's, as framework_device_peak_bytes
// (docs/net.md), or says why it cannot be read.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "deep500/core/tensor.h"

namespace d5 {

struct FrameworkDeviceMemory {
  std::string allocator;              // what holds the memory ("LibTorch's CUDA caching allocator")
  std::optional<int64_t> peak_bytes;  // bytes of live tensors at most, since the last reset
  std::string unavailable_reason;     // why peak_bytes is missing
};

struct FrameworkMemoryProbe {
  std::function<void(const Device&)> reset_peak;
  std::function<FrameworkDeviceMemory(const Device&)> read;
};

// The probe of executor `executor`'s framework (one per executor name; a later one replaces it).
void register_framework_memory_probe(const std::string& executor, FrameworkMemoryProbe probe);
// Null where the executor registered none (its tensors are all d5's).
const FrameworkMemoryProbe* framework_memory_probe(const std::string& executor);

}  // namespace d5
