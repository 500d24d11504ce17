#pragma once
// The pieces of the extension module deep500._core, one file per concept (docs/python.md).
#include <pybind11/pybind11.h>

#include "deep500/core/tensor.h"
#include "deep500/op/attributes.h"
#include "deep500/op/validation.h"

namespace d5::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
// Sets the Python exception for a C++ one (a d5 error as its deep500 class, the message kept), for
// C callbacks that must return an error code rather than throw.
void set_python_error(std::exception_ptr p);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_stats(py::module_& m);
void bind_info(py::module_& m);
void bind_custom_ops(py::module_& m);
void bind_networks(py::module_& m);
void bind_dlpack(py::module_& m);  // after bind_tensor
void bind_training(py::module_& m);  // after bind_networks
void bind_data_loader(py::module_& m);  // after bind_training

// A d5 Tensor for a Python object: a d5.Tensor as is, anything exporting a C-contiguous buffer
// (a NumPy array, a CPU torch tensor's .numpy()) without a copy, its memory kept alive by a
// reference to the object. InvalidArgument naming `what` for other objects and layouts.
Tensor to_tensor(const py::handle& obj, const std::string& what);
// The same, named "<kind> <index>" in messages (index -1: kind alone), for calls per element.
Tensor to_tensor(const py::handle& obj, const char* kind, int64_t index);

// A Python value as an ONNX attribute (int, float, str, lists of one of them, an array).
AttrValue attribute_value(const std::string& name, const py::handle& v);

// Drops a reference held by C++, taking the GIL; after the interpreter finalized (a backend's
// static cache destroyed at exit) the reference is left instead.
void release_python_object(py::object& o);

// A forward check (an operator's or an executor's) as the dict test_forward returns: state,
// detail, per tensor its norms, extra.
py::dict check_result(const ForwardCheckResult& r);

// Named tensors as a dict of d5.Tensors sharing their memory.
py::dict tensors_to_python(const std::map<std::string, Tensor>& m);

// nlohmann::json <-> Python through the json module: results and manifests are JSON documents
// in C++ already, and a dict is what a Python user expects of them.
py::object json_to_python(const std::string& dumped);

}  // namespace d5::python
