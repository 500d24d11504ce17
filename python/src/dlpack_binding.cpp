// DLPack both ways, without a copy: d5.Tensor.__dlpack__ / __dlpack_device__ (so that
// torch.from_dlpack(t) and numpy.from_dlpack(t) share d5's memory) and d5.from_dlpack(x) for
// anything exporting a capsule (a torch tensor on the CPU or a GPU). The producer's memory stays
// alive as long as the consumer's tensor: each side's deleter runs when the other lets go.
#include <Python.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "dlpack_abi.h"
#include "py_tensor.h"

namespace d5::python {

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

dlpack::DataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32: return {dlpack::kFloat, 32, 1};
    case DType::f64: return {dlpack::kFloat, 64, 1};
    case DType::f16: return {dlpack::kFloat, 16, 1};
    case DType::bf16: return {dlpack::kBfloat, 16, 1};
    case DType::i8: return {dlpack::kInt, 8, 1};
    case DType::i16: return {dlpack::kInt, 16, 1};
    case DType::i32: return {dlpack::kInt, 32, 1};
    case DType::i64: return {dlpack::kInt, 64, 1};
    case DType::u8: return {dlpack::kUInt, 8, 1};
    case DType::boolean: return {dlpack::kBool, 8, 1};
  }
  throw InternalError(fmt::format("dtype {} has no DLPack code", static_cast<int>(t)));
}

DType d5_dtype(const dlpack::DataType& t) {
  D5_CHECK_ARG(t.lanes == 1, "DLPack tensor of {}-lane vectors: d5 tensors hold scalars", t.lanes);
  const auto c = t.code;
  const int bits = t.bits;
  if (c == dlpack::kFloat && bits == 32) return DType::f32;
  if (c == dlpack::kFloat && bits == 64) return DType::f64;
  if (c == dlpack::kFloat && bits == 16) return DType::f16;
  if (c == dlpack::kBfloat && bits == 16) return DType::bf16;
  if (c == dlpack::kInt && bits == 8) return DType::i8;
  if (c == dlpack::kInt && bits == 16) return DType::i16;
  if (c == dlpack::kInt && bits == 32) return DType::i32;
  if (c == dlpack::kInt && bits == 64) return DType::i64;
  if (c == dlpack::kUInt && bits == 8) return DType::u8;
  if (c == dlpack::kBool && bits == 8) return DType::boolean;
  throw InvalidArgument(fmt::format("DLPack type code {} with {} bits has no d5 dtype", static_cast<int>(c), bits));
}

// What a capsule d5 exported owns: a copy of the tensor (sharing its storage) and the shape.
struct Exported {
  dlpack::ManagedTensor managed{};
  Tensor tensor;
  std::vector<int64_t> shape;
  std::shared_ptr<void> python_owner;  // the array a view's memory belongs to, if any
};

void delete_exported(dlpack::ManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

// A capsule nobody consumed still owns its tensor; a consumed one was renamed and is the
// consumer's to delete.
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName) == 0) return;
  auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (m && m->deleter) m->deleter(m);
}

py::capsule to_dlpack(const PyTensor& t, const py::object& /*stream*/) {
  D5_CHECK_ARG(t.tensor.defined(), "the tensor is empty (undefined): it has no memory to share");
  auto* e = new Exported;
  e->tensor = t.tensor;
  e->shape = t.tensor.shape().dims();
  dlpack::Tensor& dl = e->managed.dl_tensor;
  dl.data = e->tensor.data();
  const Device d = e->tensor.device();
  dl.device = {d.kind == DeviceKind::cpu ? dlpack::kCPU : dlpack::kCUDA, d.kind == DeviceKind::cpu ? 0 : d.index};
  dl.ndim = static_cast<int32_t>(e->shape.size());
  dl.dtype = dl_dtype(e->tensor.dtype());
  dl.shape = e->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &delete_exported;
  // d5's storage lives in the Exported copy; a view of Python memory also needs its owner,
  // released with the GIL whichever thread the consumer frees the capsule's tensor on.
  if (!t.base.is_none())
    e->python_owner = std::shared_ptr<void>(new py::object(t.base), [](void* p) {
      auto* o = static_cast<py::object*>(p);
      release_python_object(*o);
      delete o;
    });
  PyObject* cap = PyCapsule_New(&e->managed, kCapsuleName, &capsule_destructor);
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

py::tuple dlpack_device(const PyTensor& t) {
  const Device d = t.tensor.device();
  return d.kind == DeviceKind::cpu ? py::make_tuple(static_cast<int>(dlpack::kCPU), 0)
                                   : py::make_tuple(static_cast<int>(dlpack::kCUDA), d.index);
}

PyTensor from_dlpack(const py::object& producer) {
  py::object cap = py::hasattr(producer, "__dlpack__") ? producer.attr("__dlpack__")() : producer;
  D5_CHECK_ARG(PyCapsule_IsValid(cap.ptr(), kCapsuleName) == 1,
               "d5.from_dlpack(): a {} has no __dlpack__ and is not an unused DLPack capsule",
               std::string(py::str(producer.get_type().attr("__name__"))));
  auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kCapsuleName));
  // From here d5 owns the managed tensor: the deleter runs when the last d5 copy goes, or now.
  std::shared_ptr<dlpack::ManagedTensor> owner(m, [](dlpack::ManagedTensor* p) {
    if (p->deleter) p->deleter(p);
  });
  if (PyCapsule_SetName(cap.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  const dlpack::Tensor& dl = m->dl_tensor;
  D5_CHECK_ARG(dl.device.device_type == dlpack::kCPU || dl.device.device_type == dlpack::kCUDA ||
                   dl.device.device_type == dlpack::kCUDAHost,
               "d5.from_dlpack(): DLPack device type {} is neither the host nor a CUDA GPU", dl.device.device_type);
  const DType dtype = d5_dtype(dl.dtype);
  std::vector<int64_t> dims(dl.shape, dl.shape + dl.ndim);
  const Shape shape(dims);
  if (dl.strides) {
    const auto expected = shape.strides();
    for (int32_t i = 0; i < dl.ndim; ++i)
      D5_CHECK_ARG(dims[static_cast<size_t>(i)] <= 1 || dl.strides[i] == expected[static_cast<size_t>(i)],
                   "d5.from_dlpack(): the tensor is not contiguous (strides {}); d5 shares row-major memory only: "
                   "call .contiguous() first, which copies",
                   fmt::join(std::vector<int64_t>(dl.strides, dl.strides + dl.ndim), ", "));
  }
  const Device device = dl.device.device_type == dlpack::kCUDA ? Device::cuda(dl.device.device_id) : Device::cpu();
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  const TensorDesc desc{dtype, shape, Layout::any};
  // Adopted where the address meets d5's alignment on the host (then the tensor owns the
  // producer's memory wherever it goes); a view otherwise (adopt is for host memory), kept alive by
  // the d5.Tensor's reference.
  if (device.kind == DeviceKind::cpu && is_tensor_aligned(data))
    return PyTensor{Tensor::adopt(desc, data, owner), py::none()};
  auto* holder = new std::shared_ptr<dlpack::ManagedTensor>(owner);
  py::capsule keep(holder, [](void* p) { delete static_cast<std::shared_ptr<dlpack::ManagedTensor>*>(p); });
  return PyTensor{Tensor::view(desc, data, device), keep};
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::object>(m.attr("Tensor"));
  tensor.attr("__dlpack__") = py::cpp_function(&to_dlpack, py::is_method(tensor), py::arg("stream") = py::none(),
                                               "A DLPack capsule sharing this tensor's memory");
  tensor.attr("__dlpack_device__") =
      py::cpp_function(&dlpack_device, py::is_method(tensor), "(DLPack device type, index): (1, 0) for the host");
  m.def("_from_dlpack", &from_dlpack, py::arg("x"));
}

}  // namespace d5::python
