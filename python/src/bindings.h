#pragma once
// The pieces of the extension module deep500._core, one file per concept (docs/python.md).
#include <pybind11/pybind11.h>

#include "deep500/core/tensor.h"

namespace d5::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_stats(py::module_& m);
void bind_info(py::module_& m);

// A d5 Tensor for a Python object: a d5.Tensor as is, anything exporting a C-contiguous buffer
// (a NumPy array, a CPU torch tensor's .numpy()) without a copy, its memory kept alive by a
// reference to the object. InvalidArgument naming `what` for other objects and layouts.
Tensor to_tensor(const py::handle& obj, const std::string& what);

// nlohmann::json <-> Python through the json module: results and manifests are JSON documents
// in C++ already, and a dict is what a Python user expects of them.
py::object json_to_python(const std::string& dumped);

}  // namespace d5::python
