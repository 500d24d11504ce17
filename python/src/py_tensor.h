#pragma once
// d5.Tensor: a d5 Tensor and, when its memory belongs to a Python object (a NumPy array), a
// reference to that object, which keeps the memory alive as long as the tensor.
#include <pybind11/pybind11.h>

#include "deep500/core/tensor.h"

namespace d5::python {

struct PyTensor {
  Tensor tensor;
  pybind11::object base;  // None when d5 owns the memory
};

}  // namespace d5::python
