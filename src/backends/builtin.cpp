// Registers what this binary was built with: Level 2's own datasets, samplers and optimizers, then
// every backend plugin (spi/backend_plugin.h) in the order the build lists them. Which plugins
// exist is decided at configure time, so there is no if/else over backends anywhere.
#include "deep500/backends/builtin.h"

#include "deep500/op/op_registry.h"
#include "deep500/train/dataset.h"
#include "deep500/train/optimizers.h"

namespace d5 {

void register_builtin_backends() {
  static const bool once = [] {
    register_builtin_datasets();
    // Before the plugins: without LibTorch the torch-* names stay registered and refuse with the
    // package to install; the torch plugin replaces them with torch::optim.
    register_builtin_optimizers();
    for (const BackendPlugin* p : builtin_plugins())
      if (p->register_info) p->register_info();
    for (const BackendPlugin* p : builtin_plugins())
      if (p->register_optimizers) p->register_optimizers();
    return true;
  }();
  (void)once;
}

// Graph executors come with the operators they run: every binary that can create a backend's
// operators can also run whole networks on it.
void register_builtin_operators() {
  static const bool once = [] {
    register_builtin_backends();
    for (const BackendPlugin* p : builtin_plugins())
      if (p->register_operators) p->register_operators(OpRegistry::global());
    for (const BackendPlugin* p : builtin_plugins())
      if (p->register_executors) p->register_executors();
    return true;
  }();
  (void)once;
}

}  // namespace d5
