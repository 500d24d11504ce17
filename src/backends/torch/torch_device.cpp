#include "torch_device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "deep500/core/build_info.h"
#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"

namespace d5::torch_backend {

namespace {

struct AtenKinds {
  std::mutex mutex;
  std::map<std::string, at::DeviceType> types;
};

AtenKinds& aten_kinds() {
  static AtenKinds k;
  return k;
}

std::string kind_of(const std::string& device) { return device.substr(0, device.find(':')); }

// ATen's CUDA device guard is registered by LibTorch's CUDA library when it is linked: without it
// this LibTorch cannot hold a tensor on a GPU at all.
void check_cuda(const Device& d) {
  const std::string libtorch = fmt::format("LibTorch {}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                                           TORCH_VERSION_PATCH);
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA))
    throw NotBuilt(fmt::format("the torch backend's {} was built without CUDA, so it cannot put tensors on {}: "
                               "configure d5 against a CUDA-enabled LibTorch, e.g. a PyTorch installation's "
                               "(docs/gpu.md#libtorch-on-cuda)",
                               libtorch, d.to_string()));
  const auto count = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->deviceCount();
  D5_CHECK_ARG(d.index < count, "the torch backend's {} sees {} CUDA device(s), so it has no {} (check "
               "CUDA_VISIBLE_DEVICES and the driver: d5 info)", libtorch, count, d.to_string());
}

}  // namespace

std::string libtorch_cuda_build() {
  return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA) ? "built with CUDA" : "built without CUDA";
}

void register_aten_device(const std::string& kind_name, at::DeviceType type) {
  AtenKinds& k = aten_kinds();
  std::lock_guard lock(k.mutex);
  k.types[kind_name] = type;
}

TorchPlacement torch_placement(const std::string& device) {
  if (device.empty() || device == "cpu") return {};
  const std::string kind = kind_of(device);
  if (kind == "cuda" && is_not_built_backend("cuda"))
    throw NotBuilt(fmt::format("this d5 was built without the CUDA backend, whose allocator holds d5's GPU memory, "
                               "so the torch executor cannot run on {}: install the CUDA toolkit and reconfigure "
                               "(docs/building.md)",
                               device));
  TorchPlacement p;
  p.device = parse_device(device);
  if (p.device.kind == DeviceKind::cuda) {
    check_cuda(p.device);
    p.aten = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(p.device.index));
    return p;
  }
  AtenKinds& k = aten_kinds();
  std::lock_guard lock(k.mutex);
  const auto it = k.types.find(kind);
  D5_CHECK_ARG(it != k.types.end(), "the torch executor cannot put tensors on {}: ATen has no device for d5's '{}' "
               "memory (it runs on cpu and cuda)", device, kind);
  // ATen's CPU is one device without an index: its tensors report cpu, not cpu:0.
  p.aten = it->second == at::kCPU ? at::Device(at::kCPU)
                                  : at::Device(it->second, static_cast<c10::DeviceIndex>(p.device.index));
  return p;
}

}  // namespace d5::torch_backend
