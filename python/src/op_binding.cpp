// d5.op(), d5.ops.list(), d5.test_forward(), d5.test_gradient(): Level 0 from Python. An operator
// is created for one problem (OpSpec), as in C++; forward/backward take arrays with exactly the
// descriptors it was created for. The GIL is released while an operator computes.
#include <pybind11/stl.h>

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bindings.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/validation.h"
#include "py_tensor.h"

namespace d5::python {

namespace {

// Inputs whose values an operator may need at creation (Reshape's shape, Slice's starts) are
// small; those are copied into the spec, which outlives the arrays they came from.
constexpr int64_t kMaxKnownValueElements = 64;

// Operators moving less than this run with the GIL held: releasing and taking it back costs about
// as much as such a call (bench/python_overhead.py), and other Python threads gain nothing.
constexpr double kGilReleaseBytes = 64 * 1024;

struct PyOperator {
  std::shared_ptr<Operator> op;
  std::string backend;
};

std::vector<Tensor> tensors_of(const py::sequence& seq, const char* what) {
  std::vector<Tensor> out;
  const size_t n = seq.size();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const py::object item = seq[i];
    out.push_back(item.is_none() ? Tensor() : to_tensor(item, what, static_cast<int64_t>(i)));
  }
  return out;
}

py::list to_python(std::vector<Tensor> tensors) {
  py::list l;
  for (Tensor& t : tensors) l.append(PyTensor{std::move(t), py::none()});
  return l;
}

}  // namespace

AttrValue attribute_value(const std::string& name, const py::handle& v) {
  if (py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v)) return v.cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    const auto seq = v.cast<py::sequence>();
    bool all_int = true, all_num = true, all_str = true;
    for (const auto& x : seq) {
      const bool is_int = py::isinstance<py::int_>(x) || py::isinstance<py::bool_>(x);
      all_int = all_int && is_int;
      all_num = all_num && (is_int || py::isinstance<py::float_>(x));
      all_str = all_str && py::isinstance<py::str>(x);
    }
    if (all_int) return v.cast<std::vector<int64_t>>();
    if (all_num) return v.cast<std::vector<double>>();
    if (all_str) return v.cast<std::vector<std::string>>();
  } else if (PyObject_CheckBuffer(v.ptr()) == 1 || py::isinstance<PyTensor>(v)) {
    return to_tensor(v, fmt::format("attribute '{}'", name)).clone();
  }
  throw InvalidArgument(fmt::format("attribute '{}': a {} is not an ONNX attribute (int, float, str, a list of one "
                                    "of those, or an array)",
                                    name, std::string(py::str(v.get_type().attr("__name__")))));
}

namespace {

// A misspelt backend is named as such, not as "no implementation accepts this case".
void check_backend(const std::string& name) {
  const auto info = find_backend(name);
  if (!info) {
    if (is_not_built_backend(name))
      throw NotBuilt(fmt::format("this deep500 was built without the {} backend; install its dependency and rebuild "
                                 "(docs/building.md)",
                                 name));
    std::vector<std::string> built;
    for (const BackendInfo& b : backends()) built.push_back(b.name);
    throw InvalidArgument(fmt::format("no backend '{}' (built: {}; left out of this build: {})", name,
                                      fmt::join(built, ", "), not_built_list()));
  }
  if (!info->available)
    throw Unimplemented(fmt::format("backend '{}' is built but cannot run here: {}", name, info->unavailable_reason));
}

PyOperator make_op(const std::string& type, const py::sequence& inputs, const py::dict& attrs,
                   const std::optional<std::string>& backend) {
  OpSpec spec;
  spec.type = type;
  for (const auto& [k, v] : attrs) spec.attrs.set(k.cast<std::string>(), attribute_value(k.cast<std::string>(), v));
  const std::vector<Tensor> in = tensors_of(inputs, "input");
  for (const Tensor& t : in) {
    spec.inputs.push_back(t.defined() ? t.desc() : TensorDesc{});
    spec.present.push_back(t.defined());
    spec.input_values.push_back(t.defined() && t.numel() <= kMaxKnownValueElements ? std::optional(t.clone())
                                                                                   : std::nullopt);
  }
  PyOperator p;
  p.backend = backend.value_or("reference");
  check_backend(p.backend);
  p.op = OpRegistry::global().create(spec, p.backend);
  return p;
}

// The arrays of a call must be the problem the operator was created for.
void check_inputs(const PyOperator& p, const std::vector<Tensor>& in) {
  const OpSpec& s = p.op->spec();
  D5_CHECK_ARG(in.size() == s.inputs.size(), "{}: created with {} inputs, called with {}", s.label(), s.inputs.size(),
               in.size());
  for (size_t i = 0; i < in.size(); ++i)
    D5_CHECK_ARG(!s.has_input(i) || in[i].desc() == s.inputs[i],
                 "{}: input {} is {}, the operator was created for {} (create another with d5.op)", s.label(), i,
                 in[i].defined() ? in[i].desc().to_string() : "None", s.inputs[i].to_string());
}

py::list forward(PyOperator& p, const py::sequence& inputs) {
  const std::vector<Tensor> in = tensors_of(inputs, "input");
  check_inputs(p, in);
  std::vector<Tensor> out;
  if (p.op->bytes() < kGilReleaseBytes) {
    out = p.op->run_forward(in);
  } else {
    py::gil_scoped_release release;
    out = p.op->run_forward(in);
  }
  return to_python(std::move(out));
}

py::list backward(PyOperator& p, const py::sequence& grad_outputs, const py::sequence& inputs,
                  const py::sequence& outputs) {
  const std::vector<Tensor> g = tensors_of(grad_outputs, "gradient of output");
  const std::vector<Tensor> in = tensors_of(inputs, "input");
  const std::vector<Tensor> out = tensors_of(outputs, "output");
  check_inputs(p, in);
  D5_CHECK_ARG(p.op->has_gradient(), "{} on {} has no gradient: {}", p.op->spec().label(), p.backend,
               p.op->no_gradient_reason());
  std::vector<Tensor> grads;
  {
    py::gil_scoped_release release;
    grads = p.op->run_backward(g, in, out);
  }
  return to_python(std::move(grads));
}


// `reference`: a backend's name (the same problem runs there) or the expected outputs themselves.
py::dict run_test_forward(PyOperator& p, const py::sequence& inputs, const py::object& reference,
                          std::optional<double> rtol, std::optional<double> atol, int reruns) {
  const std::vector<Tensor> in = tensors_of(inputs, "input");
  check_inputs(p, in);
  std::unique_ptr<Operator> ref;
  std::vector<Tensor> expected;
  if (py::isinstance<py::str>(reference)) {
    const auto backend = reference.cast<std::string>();
    check_backend(backend);
    ref = OpRegistry::global().create(p.op->spec(), backend);
  } else {
    D5_CHECK_ARG(py::isinstance<py::sequence>(reference),
                 "reference: a backend's name or a list of expected outputs, not a {}",
                 std::string(py::str(reference.get_type().attr("__name__"))));
    expected = tensors_of(reference.cast<py::sequence>(), "expected output");
  }
  ForwardCheckOptions o;
  o.rtol = rtol;
  o.atol = atol;
  o.reruns = reruns;
  ForwardCheckResult r;
  {
    py::gil_scoped_release release;
    if (ref) expected = ref->run_forward(in);
    r = test_forward(*p.op, in, expected, o);
  }
  return check_result(r);
}

py::dict run_test_gradient(PyOperator& p, const py::sequence& inputs, double eps, double rtol, double atol,
                           uint64_t seed) {
  const std::vector<Tensor> in = tensors_of(inputs, "input");
  check_inputs(p, in);
  GradientCheckOptions o;
  o.eps = eps;
  o.rtol = rtol;
  o.atol = atol;
  o.seed = seed;
  GradientCheckResult r;
  {
    py::gil_scoped_release release;
    r = test_gradient(*p.op, in, o);
  }
  py::dict d;
  d["state"] = to_string(r.state);
  d["detail"] = r.detail;
  d["max_abs_error"] = r.max_abs_error;
  d["max_rel_error"] = r.max_rel_error;
  d["checked"] = r.checked;
  d["non_smooth"] = r.non_smooth;
  return d;
}

py::list list_ops(const std::optional<std::string>& backend) {
  py::list l;
  const OpRegistry& reg = OpRegistry::global();
  for (const std::string& type : reg.op_types())
    for (const std::string& b : reg.backends_of(type)) {
      if (backend && b != *backend) continue;
      for (const auto& impl : reg.implementations(type, b)) {
        py::dict e;
        e["type"] = impl->op_type;
        e["backend"] = impl->backend;
        e["implementation"] = impl->name;
        e["backward"] = impl->backward;
        e["notes"] = impl->notes;
        l.append(e);
      }
    }
  return l;
}

}  // namespace

py::dict check_result(const ForwardCheckResult& r) {
  py::dict d;
  d["state"] = to_string(r.state);
  d["detail"] = r.detail;
  py::list outputs;
  for (const OutputCheck& o : r.outputs) {
    py::dict e;
    e["index"] = o.index;
    e["l1"] = o.cmp.l1;
    e["l2"] = o.cmp.l2;
    e["linf"] = o.cmp.linf;
    e["rel_l2"] = o.cmp.rel_l2;
    e["max_abs_error"] = o.cmp.max_abs_error;
    e["max_rel_error"] = o.cmp.max_rel_error;
    e["mismatches"] = o.cmp.mismatches;
    e["rtol"] = o.cmp.tol.rtol;
    e["atol"] = o.cmp.tol.atol;
    e["nondeterministic"] = o.nondeterministic;
    outputs.append(e);
  }
  d["outputs"] = outputs;
  d["extra"] = json_to_python(r.extra.dump());
  return d;
}

void bind_ops(py::module_& m) {
  py::class_<PyOperator>(m, "Operator", "An operator created for one problem (d5.op)")
      .def("forward", &forward, py::arg("inputs"), "Runs forward on arrays of the created descriptors; the outputs")
      .def("backward", &backward, py::arg("grad_outputs"), py::arg("inputs"), py::arg("outputs"),
           "Gradients of the inputs (None where an input has none) for the upstream gradients of forward's outputs")
      .def_property_readonly("type", [](const PyOperator& p) { return p.op->spec().type; })
      .def_property_readonly("backend", [](const PyOperator& p) { return p.backend; })
      .def_property_readonly("implementation", [](const PyOperator& p) { return p.op->implementation(); })
      .def_property_readonly("flops", [](const PyOperator& p) { return p.op->flops(); },
                             "Operations of one forward call (a fused multiply-add counts 2)")
      .def_property_readonly("bytes", [](const PyOperator& p) { return p.op->bytes(); },
                             "Least memory traffic of one forward call")
      .def_property_readonly("has_gradient", [](const PyOperator& p) { return p.op->has_gradient(); })
      .def_property_readonly("outputs",
                             [](const PyOperator& p) {
                               py::list l;
                               for (const TensorDesc& d : p.op->output_descs()) l.append(d.to_string());
                               return l;
                             },
                             "The output descriptors, as 'f32[2, 3]'")
      .def("__repr__", [](const PyOperator& p) {
        return fmt::format("d5.Operator({} on {}: {})", p.op->spec().label(), p.backend, p.op->implementation());
      });
  // The same forward call from a C++ loop: bench/python_overhead.py's side-by-side baseline.
  m.def(
      "_time_forward_in_cpp",
      [](PyOperator& p, const py::sequence& inputs, int64_t calls) {
        const std::vector<Tensor> in = tensors_of(inputs, "input");
        check_inputs(p, in);
        py::gil_scoped_release release;
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < calls; ++i) p.op->run_forward(in);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(calls);
      },
      py::arg("op"), py::arg("inputs"), py::arg("calls"));
  m.def("_op", &make_op, py::arg("type"), py::arg("inputs"), py::arg("attrs"), py::arg("backend"));
  m.def("_list_ops", &list_ops, py::arg("backend"));
  m.def("_test_forward", &run_test_forward, py::arg("op"), py::arg("inputs"), py::arg("reference"), py::arg("rtol"),
        py::arg("atol"), py::arg("reruns"));
  m.def("_test_gradient", &run_test_gradient, py::arg("op"), py::arg("inputs"), py::arg("eps"), py::arg("rtol"),
        py::arg("atol"), py::arg("seed"));
}

}  // namespace d5::python
