// Operators written in Python (d5.CustomOperator, python/deep500/custom.py), registered with
// register_custom_op like operators compiled at run time: the registry offers them on every
// backend, so d5.op and executors create them by type name. Each call takes the GIL; inputs reach
// Python as NumPy views of d5's memory (valid during the call), results are copied into the
// outputs d5 allocated, after their shapes and types are checked against the declared ones.
#include <pybind11/stl.h>

#include <cstring>

#include <fmt/format.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"
#include "py_tensor.h"

namespace d5::python {

namespace {

py::tuple desc_to_python(const TensorDesc& d) {
  py::list dims;
  for (int64_t x : d.shape.dims()) dims.append(x);
  return py::make_tuple(py::tuple(dims), std::string(to_string(d.dtype)));
}

TensorDesc desc_from_python(const py::handle& h, const std::string& what) {
  D5_CHECK_ARG(py::isinstance<py::sequence>(h) && py::len(h) == 2,
               "{}: an output descriptor is a pair (shape, dtype), like ((2, 3), 'f32')", what);
  const auto pair = h.cast<py::sequence>();
  return TensorDesc{parse_dtype(pair[1].cast<std::string>()), Shape(pair[0].cast<std::vector<int64_t>>()),
                    Layout::any};
}

// d5 tensors as NumPy arrays sharing their memory, for the duration of one call into Python.
py::list arrays_of(std::span<const Tensor> tensors) {
  py::module_ np = py::module_::import("numpy");
  py::list l;
  for (const Tensor& t : tensors)
    l.append(t.defined() && t.numel() > 0 ? np.attr("asarray")(PyTensor{t, py::none()}) : py::object(py::none()));
  return l;
}

// One value the Python code returned, copied into the tensor d5 allocated for it.
void copy_result(const py::handle& value, Tensor& into, const std::string& what) {
  const Tensor got = to_tensor(value, what);
  D5_CHECK_ARG(got.desc().dtype == into.desc().dtype && got.shape() == into.shape(),
               "{} is {}, declared {}", what, got.desc().to_string(), into.desc().to_string());
  if (got.bytes() > 0) std::memcpy(into.data(), got.data(), got.bytes());
}

py::list as_list(const py::object& result) {
  if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) return py::list(result);
  py::list l;
  l.append(result);
  return l;
}

}  // namespace

void release_python_object(py::object& o) {
  // A backend may keep an operator until the process exits (LibTorch's autograd caches its state
  // in a static map), after the interpreter is gone: its reference is then left, not released.
  if (!Py_IsInitialized() || _Py_IsFinalizing()) {
    o.release();
    return;
  }
  py::gil_scoped_acquire gil;
  o = py::object();
}

namespace {

class PythonOperator final : public Operator {
 public:
  PythonOperator(OpSpec spec, std::vector<TensorDesc> outputs, py::object instance, bool backward)
      : Operator(std::move(spec), std::move(outputs)), instance_(std::move(instance)), backward_(backward) {}
  ~PythonOperator() override { release_python_object(instance_); }
  std::string implementation() const override {
    py::gil_scoped_acquire gil;
    return "python:" + std::string(py::str(instance_.get_type().attr("__qualname__")));
  }
  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override {
    py::gil_scoped_acquire gil;
    const py::list results = as_list(instance_.attr("forward")(*arrays_of(inputs)));
    D5_CHECK_ARG(results.size() == outputs.size(), "{}: forward returned {} values, declared {} outputs",
                 spec().label(), results.size(), outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i)
      copy_result(results[i], outputs[i], fmt::format("{}: forward's output {}", spec().label(), i));
  }
  std::vector<bool> differentiable_inputs() const override {
    if (!backward_) return {};
    std::vector<bool> mask;
    for (size_t i = 0; i < spec().inputs.size(); ++i)
      mask.push_back(spec().has_input(i) && is_floating(spec().inputs[i].dtype));
    return mask;
  }
  std::string no_gradient_reason() const override { return "its Python class defines no backward"; }
  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                std::span<Tensor> grad_inputs) override {
    py::gil_scoped_acquire gil;
    const py::list results =
        as_list(instance_.attr("backward")(arrays_of(grad_outputs), arrays_of(inputs), arrays_of(outputs)));
    D5_CHECK_ARG(results.size() == grad_inputs.size(), "{}: backward returned {} gradients for {} inputs",
                 spec().label(), results.size(), grad_inputs.size());
    for (size_t i = 0; i < grad_inputs.size(); ++i) {
      if (!grad_inputs[i].defined() || grad_inputs[i].numel() == 0) continue;
      D5_CHECK_ARG(!results[i].is_none(), "{}: backward returned None for input {}, which has a gradient",
                   spec().label(), i);
      copy_result(results[i], grad_inputs[i], fmt::format("{}: backward's gradient of input {}", spec().label(), i));
    }
  }
  double flops() const override {
    py::gil_scoped_acquire gil;
    return instance_.attr("flops")().cast<double>();
  }

 private:
  py::object instance_;
  bool backward_;
};

void register_python_op(const std::string& type, const py::object& cls, bool backward) {
  // The registry lives until the process exits, after the interpreter is gone: the class is kept
  // in a reference that is never released (released then, it would touch a finalized interpreter).
  auto* keep = new py::object(cls);
  OpFactory factory = [keep, backward](const OpSpec& spec) -> OpCreateResult {
    py::gil_scoped_acquire gil;
    py::list descs;
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      descs.append(spec.has_input(i) ? py::object(desc_to_python(spec.inputs[i])) : py::object(py::none()));
    py::dict attrs;
    for (const auto& [name, value] : spec.attrs.all())
      std::visit(
          [&](const auto& v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Tensor>)
              attrs[py::str(name)] = PyTensor{v, py::none()};
            else
              attrs[py::str(name)] = py::cast(v);
          },
          value);
    py::object instance = (*keep)(descs, attrs);
    std::vector<TensorDesc> outputs;
    for (const auto& d : instance.attr("output_descs")())
      outputs.push_back(desc_from_python(d, fmt::format("{}.output_descs()", spec.type)));
    return std::make_unique<PythonOperator>(spec, std::move(outputs), std::move(instance), backward);
  };
  register_custom_op(type, std::move(factory), backward,
                     fmt::format("written in Python: {}", std::string(py::str(cls.attr("__qualname__")))));
}

}  // namespace

void bind_custom_ops(py::module_& m) {
  m.def("_register_op", &register_python_op, py::arg("type"), py::arg("cls"), py::arg("backward"));
}

}  // namespace d5::python
