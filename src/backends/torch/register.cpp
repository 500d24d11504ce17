#include <omp.h>

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <fmt/format.h>

#include "aten_memory.h"
#include "custom_autograd.h"
#include "deep500/core/backend.h"
#include "deep500/net/graph_executor.h"
#include "deep500/core/runtime_libraries.h"
#include "deep500/spi/backend_plugin.h"
#include "torch_device.h"
#include "torch_executor.h"
#include "torch_op.h"

namespace d5::torch_backend {

void register_optimizers();  // torch_optimizers.cpp

void register_backend() {
  // LibTorch initializes its thread pools lazily and, on the way, sets the process-wide OpenMP
  // thread count to its own default (1 on some hosts), which would silently slow oneDNN and the
  // reference backend too. Initialize it now and put every library back on OpenMP's default.
  const int omp_default = omp_get_max_threads();
  if (at::get_num_threads() != omp_default) at::set_num_threads(omp_default);

  BackendInfo b;
  b.name = "torch";
  b.description = "LibTorch / ATen operators, autograd and torch::optim";
  b.version = fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
  b.set_threads = [](int n) { at::set_num_threads(n); };
  b.get_threads = [] { return at::get_num_threads(); };
  // Whether --device cuda can work is a property of the LibTorch linked (Debian's is CPU-only).
  register_runtime_library("libtorch", fmt::format("{}, {}", b.version, libtorch_cuda_build()));
  d5::register_backend(std::move(b));
  // Custom operators registered on "torch" become autograd functions, usable in ATen graphs.
  register_custom_op_adapter("torch", [](std::unique_ptr<Operator> op) -> std::unique_ptr<Operator> {
    return std::make_unique<AutogradOp>(std::move(op));
  });
}

void register_executors() {
  register_executor("torch", [](Network& net, const ExecutorOptions& options) -> std::unique_ptr<GraphExecutor> {
    // Pins name registry implementations; this executor runs ATen kernels chosen by LibTorch.
    if (!options.pins.empty())
      throw Unimplemented(fmt::format("the torch executor runs LibTorch's own kernels and cannot pin {} to {}; "
                                      "pin implementations on the reference or onednn executor",
                                      options.pins.begin()->first, options.pins.begin()->second));
    return std::make_unique<TorchExecutor>(net, options);
  }, /*takes_device=*/true);
  register_framework_memory_probe("torch", {&reset_aten_device_peak, &aten_device_memory});
}

// The one list of torch operator families.
void register_operators(OpRegistry& r) {
  register_elementwise_ops(r);
  register_norm_ops(r);
  register_reduce_ops(r);
  register_movement_ops(r);
  register_rnn_ops(r);
  register_nn_ops(r);
  register_indexing_ops(r);
  register_spectral_ops(r);
  register_ctc_ops(r);
}

}  // namespace d5::torch_backend

namespace d5::plugins {
extern const BackendPlugin torch;
const BackendPlugin torch{"torch", &torch_backend::register_backend, &torch_backend::register_operators,
                          &torch_backend::register_executors, &torch_backend::register_optimizers};
}  // namespace d5::plugins
