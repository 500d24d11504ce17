#pragma once
// The high-water mark of LibTorch's caching allocator on a device: where the torch executor's
// activations and ATen's results live on a GPU, outside d5's allocator. Registered as the torch
// executor's framework memory probe (deep500/net/framework_memory.h).
//
// LibTorch's C++ API offers device allocator statistics only in newer versions
// (c10::getDeviceAllocator(type)->getDeviceStats(index)); CMake checks whether the LibTorch
// found has it (D5_TORCH_DEVICE_STATS). Without it, or for ATen's host memory, the reading is
// unavailable with the reason.
#include "deep500/net/framework_memory.h"

namespace d5::torch_backend {

// Bytes of live tensors at most (LibTorch's requested bytes, all pools) since the last reset.
FrameworkDeviceMemory aten_device_memory(const Device& device);
void reset_aten_device_peak(const Device& device);

}  // namespace d5::torch_backend
