// deep500._core: the C++ core for the Python package (python/deep500/__init__.py).
#include "bindings.h"

#include "deep500/backends/builtin.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "deep500's C++ core: tensors, operators, validation and statistics (docs/python.md)";
  // The same registrations the CLI makes first thing: every built backend's operators.
  d5::register_builtin_operators();
  d5::python::bind_errors(m);
  d5::python::bind_tensor(m);
  d5::python::bind_ops(m);
  d5::python::bind_stats(m);
  d5::python::bind_info(m);
  d5::python::bind_custom_ops(m);
  d5::python::bind_networks(m);
  d5::python::bind_dlpack(m);
  d5::python::bind_training(m);
  d5::python::bind_data_loader(m);
}
