#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "cuda_allocator.h"
#include "cuda_common.h"
#include "deep500/core/backend.h"
#include "deep500/core/device.h"
#include "deep500/core/runtime_libraries.h"
#include "deep500/spi/backend_plugin.h"
#include "nvml.h"

namespace d5::cuda {

namespace {
std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// What NVML says of the GPU at `g.pci_bus_id`, or why it says nothing.
void add_nvml_facts(GpuInfo& g) {
  std::string reason;
  const Nvml* n = nvml(&reason);
  g.ecc = "unknown";
  if (!n) {
    g.nvml = reason;
    return;
  }
  g.nvml = "NVML " + n->version();
  g.driver_version = n->driver_version();  // the full version ("535.104.05"), not CUDA's "12.2"
  const auto ecc = n->ecc_enabled(g.pci_bus_id);
  g.ecc = ecc ? (*ecc ? "on" : "off") : "unsupported";
  if (const auto s = n->sample(g.pci_bus_id, &reason)) {
    g.sm_clock_mhz_at_start = s->sm_clock_mhz;
    g.memory_clock_mhz_at_start = s->memory_clock_mhz;
  }
}

std::vector<GpuInfo> enumerate(std::string* reason) {
  std::vector<GpuInfo> gpus;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = fmt::format("no usable CUDA device: {}", cudaGetErrorString(err));
    return gpus;
  }
  int driver = 0;
  cudaDriverGetVersion(&driver);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    g.multiprocessors = p.multiProcessorCount;
    g.compute_capability_major = p.major;
    g.compute_capability_minor = p.minor;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, i) == cudaSuccess) g.clock_mhz = khz / 1000.0;
    g.driver_version = version_string(driver);
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) g.pci_bus_id = bus;
    add_nvml_facts(g);
    gpus.push_back(std::move(g));
  }
  if (gpus.empty() && reason) *reason = "the CUDA runtime reports no devices";
  return gpus;
}
}  // namespace

void register_gpu_peak();       // gpu_peak.cpp
void register_fused_updates();  // fused_updates.cpp
void register_executor();       // executor.cpp

void register_backend() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  set_gpu_enumerator(&enumerate);
  BackendInfo b;
  b.name = "cuda";
  b.description = "NVIDIA GPUs: operators on cuBLAS, cuDNN and own kernels, an executor keeping parameters on the device (cuda:0)";
  b.version = version_string(runtime);
  std::string reason;
  if (enumerate(&reason).empty()) {
    b.available = false;
    b.unavailable_reason = reason;
  }
  register_runtime_library("cuda_runtime", b.version);
  register_runtime_library("cublas", cublas_version());
  register_runtime_library("cudnn", cudnn_version());
  std::string nvml_reason;
  if (const Nvml* n = nvml(&nvml_reason)) register_runtime_library("nvml", n->version());
  register_device_kind(std::make_shared<CudaAllocator>());
  register_fused_updates();
  if (b.available) register_gpu_peak();
  d5::register_backend(std::move(b));
}

// The one list of CUDA operator families.
void register_operators(OpRegistry& r) {
  register_elementwise_ops(r);
  register_gemm_ops(r);
  register_shape_ops(r);
  register_cudnn_ops(r);
  register_movement_ops(r);
  register_dropout_op(r);
  register_rnn_ops(r);
  register_constant_ops(r);
  register_logic_ops(r);
  register_variadic_ops(r);
  register_instance_norm_op(r);
}

}  // namespace d5::cuda

namespace d5::plugins {
extern const BackendPlugin cuda;
const BackendPlugin cuda{"cuda", &d5::cuda::register_backend, &d5::cuda::register_operators,
                         &d5::cuda::register_executor, nullptr};
}  // namespace d5::plugins
