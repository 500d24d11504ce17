#pragma once
// Where the torch executor keeps its tensors (docs/torch-executor.md#devices).
//
// A d5 device maps to the ATen device that reads the same memory: the host to ATen's CPU, d5's
// cuda:N to ATen's CUDA device N. Both libraries work in the CUDA runtime's primary context of the
// GPU, so ATen reads d5's buffers without a copy (at::from_blob), and work either queues on the
// legacy default stream is ordered with the other's. (ATen's results are copied into d5 tensors
// there: Tensor::adopt takes host buffers only.) Other d5 device kinds map to an ATen device only where one is registered: the
// tests map the host-memory test device to ATen's CPU, so that every placement path (parameters
// moved once, feeds copied in, outputs copied out, gradients left on the device) runs without a
// GPU.
#include <ATen/ATen.h>

#include <string>

#include "deep500/core/tensor.h"

namespace d5::torch_backend {

struct TorchPlacement {
  Device device;                // where d5 holds the executor's tensors
  at::Device aten{at::kCPU};    // the ATen device that reads them
  bool host() const { return device == Device::cpu(); }
};

// "" and "cpu" are the host. Throws InvalidArgument for a device d5 does not know or ATen has no
// counterpart for, NotBuilt for cuda where this d5 or its LibTorch was built without CUDA, and
// InvalidArgument where LibTorch has CUDA but sees no such GPU.
TorchPlacement torch_placement(const std::string& device);

// "built with CUDA" or "built without CUDA": whether the LibTorch linked can hold tensors on a GPU
// (its CUDA device guard is registered), for the manifest. Starts no CUDA runtime, which must not
// run before d5 binds the process to its GPU (docs/gpu.md#several-gpus-in-a-node).
std::string libtorch_cuda_build();

// Lets d5 devices of kind `kind_name` be read as ATen's `type` (tests: "testmem" as CPU memory).
void register_aten_device(const std::string& kind_name, at::DeviceType type);

}  // namespace d5::torch_backend
