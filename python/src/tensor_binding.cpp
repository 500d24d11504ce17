// d5.Tensor and d5.tensor(): NumPy arrays in, d5 tensors out, both without a copy (the buffer
// protocol both ways). A NumPy array becomes a view of its memory (Tensor::view; adopting would
// ask d5's 64-byte alignment, which NumPy does not promise) held alive by the d5.Tensor; a d5
// tensor is exported as a buffer whose owner is the d5.Tensor, so numpy.asarray(t) shares it.
#include <cstring>

#include <fmt/format.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/core/shape.h"
#include "py_tensor.h"

namespace d5::python {

namespace {

// The struct-module format of a dtype; bf16 has none (NumPy has no bfloat16).
std::string buffer_format(DType t) {
  switch (t) {
    case DType::f32: return "f";
    case DType::f64: return "d";
    case DType::f16: return "e";
    case DType::i8: return "b";
    case DType::i16: return "h";
    case DType::i32: return "i";
    case DType::i64: return "q";
    case DType::u8: return "B";
    case DType::boolean: return "?";
    default: break;
  }
  throw InvalidArgument(fmt::format("a {} tensor has no NumPy equivalent (NumPy has no {}); cast it to f32 first",
                                    to_string(t), to_string(t)));
}

// A buffer's element type: the format's last character (after any byte-order prefix) and the
// item size, since 'l' and 'q' are both 64-bit integers on Linux.
DType dtype_of_buffer(const py::buffer_info& info, const char* kind, int64_t index) {
  const std::string& f = info.format;
  const char c = f.empty() ? '?' : f.back();
  const bool native = f.size() == 1 || f.front() == '@' || f.front() == '=' || f.front() == '<';
  const auto size = info.itemsize;
  if (native) {
    if (c == 'f' && size == 4) return DType::f32;
    if (c == 'd' && size == 8) return DType::f64;
    if (c == 'e' && size == 2) return DType::f16;
    if ((c == 'b') && size == 1) return DType::i8;
    if (c == 'B' && size == 1) return DType::u8;
    if (c == '?' && size == 1) return DType::boolean;
    if ((c == 'h') && size == 2) return DType::i16;
    if ((c == 'i' || c == 'l') && size == 4) return DType::i32;
    if ((c == 'l' || c == 'q') && size == 8) return DType::i64;
  }
  throw InvalidArgument(fmt::format("{}: element format '{}' ({} bytes) has no d5 dtype (d5 takes float32, float64, "
                                    "float16, int8/16/32/64, uint8 and bool in native byte order)",
                                    index < 0 ? std::string(kind) : fmt::format("{} {}", kind, index), f, size));
}

py::buffer_info export_buffer(PyTensor& t) {
  D5_CHECK_ARG(t.tensor.defined(), "the tensor is empty (undefined): it has no memory to share");
  D5_CHECK_ARG(t.tensor.on_host(), "the tensor lives on {}: copy it to the host before reading it from NumPy",
               t.tensor.device().to_string());
  const auto item = static_cast<py::ssize_t>(dtype_size(t.tensor.dtype()));
  std::vector<py::ssize_t> shape, strides;
  for (int64_t d : t.tensor.shape().dims()) shape.push_back(d);
  for (int64_t s : t.tensor.shape().strides()) strides.push_back(s * item);
  return py::buffer_info(t.tensor.data(), item, buffer_format(t.tensor.dtype()), static_cast<py::ssize_t>(shape.size()),
                         shape, strides, /*readonly=*/false);
}

py::list int_list(const std::vector<int64_t>& v) {
  py::list l;
  for (int64_t x : v) l.append(x);
  return l;
}

// The buffer protocol's entry point for d5.Tensor, in place of pybind11's (2.10), which lets an
// exception of the exporting function escape into the interpreter, where it aborts the process: a
// tensor NumPy cannot read (on a GPU, bfloat16) must raise the d5 error instead. The view is
// filled as pybind11 fills it, so that its release hook frees it.
extern "C" int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "d5.Tensor: no buffer view to fill");
    return -1;
  }
  std::memset(view, 0, sizeof(Py_buffer));
  try {
    auto* info = new py::buffer_info(export_buffer(py::handle(obj).cast<PyTensor&>()));
    view->obj = obj;
    view->internal = info;
    view->buf = info->ptr;
    view->itemsize = info->itemsize;
    view->len = info->itemsize * info->size;
    view->readonly = info->readonly ? 1 : 0;
    view->ndim = 1;
    if ((flags & PyBUF_FORMAT) == PyBUF_FORMAT) view->format = const_cast<char*>(info->format.c_str());
    if ((flags & PyBUF_STRIDES) == PyBUF_STRIDES) {
      view->ndim = static_cast<int>(info->ndim);
      view->strides = info->strides.data();
      view->shape = info->shape.data();
    }
    Py_INCREF(obj);
    return 0;
  } catch (...) {
    view->obj = nullptr;
    set_python_error(std::current_exception());
    return -1;
  }
}

}  // namespace

Tensor to_tensor(const py::handle& obj, const char* kind, int64_t index) {
  if (py::isinstance<PyTensor>(obj)) return obj.cast<PyTensor&>().tensor;
  // Named only when something is wrong: formatting it on every call would cost more than the rest.
  const auto what = [&] { return index < 0 ? std::string(kind) : fmt::format("{} {}", kind, index); };
  D5_CHECK_ARG(PyObject_CheckBuffer(obj.ptr()) == 1,
               "{}: a {} is not an array (pass a NumPy array, a d5.Tensor, or a torch tensor via d5.tensor())", what(),
               std::string(py::str(obj.get_type().attr("__name__"))));
  const py::buffer_info info = py::reinterpret_borrow<py::buffer>(obj).request();
  const DType dtype = dtype_of_buffer(info, kind, index);
  Shape shape(std::vector<int64_t>(info.shape.begin(), info.shape.end()));
  int64_t expected = info.itemsize;
  for (size_t i = shape.rank(); i-- > 0;) {
    D5_CHECK_ARG(shape[i] <= 1 || info.strides[i] == expected,
                 "{}: the array is not C-contiguous (strides {} bytes); d5 shares memory only in row-major order: "
                 "pass numpy.ascontiguousarray(a), which copies",
                 what(), fmt::join(info.strides, ", "));
    expected *= shape[i];
  }
  return Tensor::view(TensorDesc{dtype, std::move(shape), Layout::any}, info.ptr);
}

Tensor to_tensor(const py::handle& obj, const std::string& what) { return to_tensor(obj, what.c_str(), -1); }

void bind_tensor(py::module_& m) {
  auto cls = py::class_<PyTensor>(m, "Tensor", py::buffer_protocol(), R"doc(
A d5 tensor. numpy.asarray(t) shares its memory (no copy); d5.tensor(array) makes one that shares
the array's memory. Element types: float32, float64, float16, int8/16/32/64, uint8, bool.)doc")
      .def_buffer(&export_buffer)
      .def_property_readonly("shape", [](const PyTensor& t) { return py::tuple(int_list(t.tensor.shape().dims())); })
      .def_property_readonly("dtype", [](const PyTensor& t) { return std::string(to_string(t.tensor.dtype())); })
      .def_property_readonly("device", [](const PyTensor& t) { return t.tensor.device().to_string(); })
      .def_property_readonly("shares_memory_with_python",
                             [](const PyTensor& t) { return !t.base.is_none(); },
                             "True when the memory belongs to a Python object (the array it was made from)")
      // NumPy reads through the buffer protocol and, when that fails, quietly wraps the object in
      // an array of dtype object; it asks __array__ before that, which raises the reason instead.
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) {
            export_buffer(self.cast<PyTensor&>());  // throws for what NumPy cannot read
            const py::module_ np = py::module_::import("numpy");
            const py::object shared = np.attr("asarray")(py::memoryview(self), dtype);
            return copy.is_none() || !copy.cast<bool>() ? shared : np.attr("array")(shared, py::arg("copy") = true);
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
          "The array sharing this tensor's memory (a copy for another dtype or copy=True); d5.InvalidArgument "
          "saying why when NumPy cannot read it")
      .def("__repr__", [](const PyTensor& t) {
        return fmt::format("d5.Tensor({} on {})", t.tensor.desc().to_string(), t.tensor.device().to_string());
      });
  // pybind11 made d5.Tensor a heap type whose buffer slots it set (def_buffer); only the export changes.
  reinterpret_cast<PyHeapTypeObject*>(cls.ptr())->as_buffer.bf_getbuffer = &tensor_getbuffer;
  PyType_Modified(reinterpret_cast<PyTypeObject*>(cls.ptr()));
  m.def(
      "_tensor",
      [](const py::object& array) {
        if (py::isinstance<PyTensor>(array)) return array.cast<PyTensor>();
        return PyTensor{to_tensor(array, "d5.tensor()"), array};
      },
      py::arg("array"), "A d5.Tensor sharing the memory of a C-contiguous array (no copy)");
}

}  // namespace d5::python
