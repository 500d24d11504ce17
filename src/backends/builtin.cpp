// Registers the backends this binary was built with. Which ones is decided at configure time
// (D5_WITH_*), so there is no run-time if/else over backends anywhere else.
#include "deep500/core/backend.h"
#include "deep500/train/dataset.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/operator_executor.h"
#include "deep500/train/optimizers.h"

namespace d5 {
namespace reference { void register_all(); }
#ifdef D5_HAVE_TORCH
namespace torch_backend {
void register_backend();
void register_operators(OpRegistry& r);
}  // namespace torch_backend
#endif
#ifdef D5_HAVE_ONEDNN
namespace onednn {
void register_backend();
void register_operators(OpRegistry& r);
void register_executor();
}  // namespace onednn
#endif
#ifdef D5_HAVE_CUDA
namespace cuda { void register_backend(); }
#endif
#ifdef D5_HAVE_MPI
namespace dist { void register_mpi_library(); }
#endif

void register_builtin_backends() {
  static const bool once = [] {
    reference::register_all();
    register_builtin_datasets();
    // Before the backends: without LibTorch the torch-* names stay registered and refuse with the
    // package to install; the torch backend, registered next, replaces them with torch::optim.
    register_builtin_optimizers();
#ifdef D5_HAVE_TORCH
    torch_backend::register_backend();
#endif
#ifdef D5_HAVE_ONEDNN
    onednn::register_backend();
#endif
#ifdef D5_HAVE_CUDA
    cuda::register_backend();
#endif
#ifdef D5_HAVE_MPI
    dist::register_mpi_library();
#endif
    return true;
  }();
  (void)once;
}

// Graph executors come with the operators they run: every binary that can create a backend's
// operators can also run whole networks on it.
namespace {
void register_builtin_executors() {
  register_executor("reference", [](Network& network, const ExecutorOptions& o) -> std::unique_ptr<GraphExecutor> {
    return std::make_unique<ReferenceExecutor>(network, operator_executor_options(o));
  });
#ifdef D5_HAVE_ONEDNN
  onednn::register_executor();
#endif
}
}  // namespace

void register_builtin_operators() {
  static const bool once = [] {
    register_builtin_backends();
#ifdef D5_HAVE_TORCH
    torch_backend::register_operators(OpRegistry::global());
#endif
#ifdef D5_HAVE_ONEDNN
    onednn::register_operators(OpRegistry::global());
#endif
    register_builtin_executors();
    return true;
  }();
  (void)once;
}

}  // namespace d5
