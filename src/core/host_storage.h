#pragma once
// Host tensor storage, counted in tensor_memory_stats() (shared by Tensor and the host allocator).
#include <cstddef>
#include <memory>

#include "deep500/core/device_allocator.h"

namespace d5::detail {

std::shared_ptr<void> allocate_host_storage(size_t bytes);
DeviceMemoryStats host_storage_stats();

}  // namespace d5::detail
