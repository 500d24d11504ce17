#include "aten_memory.h"

#include <fmt/format.h>
#include <torch/version.h>

#include "deep500/core/error.h"
#include "torch_device.h"

#if D5_TORCH_DEVICE_STATS
#include <c10/core/CachingDeviceAllocator.h>
#endif

namespace d5::torch_backend {
namespace {

// The ATen device that holds `device`'s tensors, or why its allocator cannot be read.
std::optional<at::Device> aten_device(const Device& device, std::string& why_not) {
  try {
    const TorchPlacement p = torch_placement(device.to_string());
    if (p.aten.type() == at::kCPU) {
      why_not = fmt::format("ATen holds {}'s tensors in host memory, of which it keeps no statistics",
                            device.to_string());
      return std::nullopt;
    }
    return p.aten;
  } catch (const Error& e) {
    why_not = e.what();
    return std::nullopt;
  }
}

}  // namespace

FrameworkDeviceMemory aten_device_memory(const Device& device) {
  FrameworkDeviceMemory m;
  m.allocator = "LibTorch's caching allocator";
  const auto where = aten_device(device, m.unavailable_reason);
  if (!where) return m;
  m.allocator = fmt::format("LibTorch's {} caching allocator", c10::DeviceTypeName(where->type()));
#if D5_TORCH_DEVICE_STATS
  try {
    const auto stats = c10::getDeviceAllocator(where->type())->getDeviceStats(where->index());
    m.peak_bytes = stats.requested_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  } catch (const c10::Error& e) {  // a device type whose allocator keeps no statistics
    m.unavailable_reason = fmt::format("LibTorch refused to read its {} allocator: {}",
                                       c10::DeviceTypeName(where->type()), e.what_without_backtrace());
  }
#else
  m.unavailable_reason = "LibTorch " TORCH_VERSION
                         " has no device allocator statistics in its C++ API (c10::DeviceAllocator, in newer LibTorch)";
#endif
  return m;
}

void reset_aten_device_peak(const Device& device) {
  std::string why_not;
  const auto where = aten_device(device, why_not);
  if (!where) return;
#if D5_TORCH_DEVICE_STATS
  try {
    c10::getDeviceAllocator(where->type())->resetPeakStats(where->index());
  } catch (const c10::Error&) {  // aten_device_memory names why it cannot be read
  }
#endif
}

}  // namespace d5::torch_backend
