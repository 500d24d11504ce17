#pragma once
// The backends this binary was built with (docs/contributing.md#a-backend). Each is a plugin
// (spi/backend_plugin.h); the build generates their list. Programs call these once before using
// operators, executors or optimizers by name; both are idempotent and thread-safe.
#include <vector>

#include "deep500/spi/backend_plugin.h"

namespace d5 {

// Datasets, samplers and optimizers of Level 2, then every plugin's backend info and native
// optimizers. A framework's optimizer names ("torch-adam") are registered in every build and
// throw Unimplemented naming the missing backend; the framework's plugin, when built, registers
// the working optimizer under the same name in their place.
void register_builtin_backends();
// register_builtin_backends(), then every plugin's operators and graph executors.
void register_builtin_operators();
// The plugins, in the order they register (reference first).
const std::vector<const BackendPlugin*>& builtin_plugins();

}  // namespace d5
