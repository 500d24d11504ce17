// d5's typed errors as Python exceptions with the same message. Each is also the built-in
// exception a Python user would catch for it (InvalidArgument is a ValueError, IoError an OSError,
// Unimplemented a NotImplementedError), so code that knows nothing of deep500 still handles them.
#include <Python.h>

#include "bindings.h"
#include "deep500/core/error.h"

namespace d5::python {

namespace {

// Set once by bind_errors: raises a d5 error as its Python exception, rethrows anything else.
void (*raise_python_error)(std::exception_ptr) = nullptr;

PyObject* new_exception(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  py::tuple t(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) t[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string("deep500.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, t.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

}  // namespace

void bind_errors(py::module_& m) {
  static PyObject* error = new_exception(m, "Error", {PyExc_RuntimeError}, "Base of deep500's errors.");
  static PyObject* invalid = new_exception(m, "InvalidArgument", {error, PyExc_ValueError},
                                           "An argument deep500 cannot use; the message says what to change.");
  static PyObject* unimplemented = new_exception(m, "Unimplemented", {error, PyExc_NotImplementedError},
                                                 "What no build of deep500 does, or a backend refuses.");
  static PyObject* not_built = new_exception(m, "NotBuilt", {unimplemented},
                                             "A backend or library this build left out; rebuilding with it works.");
  static PyObject* format = new_exception(m, "FormatError", {error, PyExc_ValueError}, "A malformed file or text.");
  static PyObject* io = new_exception(m, "IoError", {error, PyExc_OSError}, "A file or device that cannot be used.");
  static PyObject* internal = new_exception(m, "InternalError", {error}, "A bug in deep500: please report it.");
  raise_python_error = [](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NotBuilt& e) {
      PyErr_SetString(not_built, e.what());
    } catch (const Unimplemented& e) {
      PyErr_SetString(unimplemented, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(invalid, e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(format, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(io, e.what());
    } catch (const InternalError& e) {
      PyErr_SetString(internal, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  };
  py::register_exception_translator([](std::exception_ptr p) { raise_python_error(p); });
}

void set_python_error(std::exception_ptr p) {
  try {
    if (raise_python_error) {
      raise_python_error(p);
      return;
    }
    std::rethrow_exception(p);
  } catch (const std::exception& e) {  // not one of deep500's errors: pybind11's own or the library's
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "an unknown C++ exception");
  }
}

}  // namespace d5::python
