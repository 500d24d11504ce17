#pragma once
// What a backend gives deep500 (docs/contributing.md#a-backend). A backend is one folder under
// src/backends/ whose CMakeLists.txt ends with d5_backend_plugin(NAME LIBRARY); the build
// generates the list of plugins it was configured with, and register_builtin_backends() /
// register_builtin_operators() walk it. Each entry may be null where a backend has nothing of
// that kind. Registration functions register into the registries of the layers they extend:
// register_backend (core), OpRegistry (op), register_executor (net), register_optimizer (train).
namespace d5 {

class OpRegistry;

struct BackendPlugin {
  const char* name;
  // Its BackendInfo, runtime library versions, device enumerators, custom-operator adapters.
  void (*register_info)();
  // Its operators.
  void (*register_operators)(OpRegistry& registry);
  // Its graph executors (register_executor).
  void (*register_executors)();
  // Its native optimizers (register_optimizer); they replace placeholders of the same name.
  void (*register_optimizers)();
};

}  // namespace d5
