// Level 1 from Python: networks (the model zoo, ONNX files), executors of every backend with
// events as Python callbacks, and their validation against the reference executor. An executor
// keeps its network alive; the GIL is released while it runs and taken again for a callback.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/model_zoo.h"
#include "py_network.h"
#include "py_tensor.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"
#endif

namespace d5::python {

py::dict tensors_to_python(const TensorMap& m) {
  py::dict d;
  for (const auto& [name, t] : m) d[py::str(name)] = PyTensor{t, py::none()};
  return d;
}

// Python callbacks; an operator event whose function returns False stops the executor.
class PythonEvents final : public ExecutorEvent {
 public:
  std::map<std::string, std::vector<py::function>> callbacks;
  ~PythonEvents() override {
    for (auto& [event, fns] : callbacks)
      for (auto& fn : fns) release_python_object(fn);
  }
  void before_executor(const TensorMap& feeds) override { call_map("before_executor", feeds); }
  bool before_operator(const Node& node, Pass pass, std::span<const Tensor> inputs) override {
    return call_op("before_op", node, pass, inputs);
  }
  bool after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs) override {
    return call_op("after_op", node, pass, outputs);
  }
  void after_inference(const TensorMap& outputs) override { call_map("after_inference", outputs); }
  void after_backprop(const TensorMap& gradients) override { call_map("after_backprop", gradients); }
  void after_executor(const TensorMap& outputs) override { call_map("after_executor", outputs); }

 private:
  void call_map(const char* event, const TensorMap& m) {
    if (!callbacks.count(event)) return;
    py::gil_scoped_acquire gil;
    const py::dict d = tensors_to_python(m);
    for (const auto& fn : callbacks[event]) fn(d);
  }
  bool call_op(const char* event, const Node& node, Pass pass, std::span<const Tensor> tensors) {
    if (!callbacks.count(event)) return true;
    py::gil_scoped_acquire gil;
    py::list l;
    for (const Tensor& t : tensors) l.append(t.defined() ? py::cast(PyTensor{t, py::none()}) : py::none());
    bool go_on = true;
    for (const auto& fn : callbacks[event]) {
      const py::object r = fn(node.name, node.op_type, pass == Pass::forward ? "forward" : "backward", l);
      if (!r.is_none() && !r.cast<bool>()) go_on = false;
    }
    return go_on;
  }
};

namespace {

// Executor events a Python function can follow, by the name on() takes.
const std::vector<std::string> kEvents = {"before_executor", "before_op",      "after_op",
                                          "after_inference", "after_backprop", "after_executor"};


// Feeds as views of the caller's arrays; after the call the network forgets them, so that no
// stored value outlives the arrays.
TensorMap feeds_of(const py::dict& feeds) {
  TensorMap m;
  for (const auto& [k, v] : feeds) {
    const std::string name = k.cast<std::string>();
    m[name] = to_tensor(v, fmt::format("feed '{}'", name));
  }
  return m;
}

void forget_feeds(Network& net, const TensorMap& feeds) {
  for (const auto& [name, t] : feeds)
    if (!net.is_initializer(name)) net.release_value(name);
}

py::dict run_inference(PyExecutor& e, const py::dict& feeds) {
  const TensorMap in = feeds_of(feeds);
  TensorMap out;
  {
    py::gil_scoped_release release;
    out = e.ex->inference(in);
    forget_feeds(*e.net, in);
  }
  return tensors_to_python(out);
}

py::dict run_backprop(PyExecutor& e, const py::dict& feeds, const std::string& loss) {
  const TensorMap in = feeds_of(feeds);
  TensorMap out;
  {
    py::gil_scoped_release release;
    out = e.ex->inference_and_backprop(in, loss);
    forget_feeds(*e.net, in);
  }
  return tensors_to_python(out);
}

py::dict gradients(const PyExecutor& e) {
  py::dict d;
  for (const auto& [param, grad] : e.net->gradient())
    if (e.net->has_value(grad)) d[py::str(param)] = PyTensor{e.net->fetch_tensor(grad), py::none()};
  return d;
}

void on(PyExecutor& e, const std::string& event, const py::function& fn) {
  D5_CHECK_ARG(std::find(kEvents.begin(), kEvents.end(), event) != kEvents.end(), "no executor event '{}' (events: {})",
               event, fmt::join(kEvents, ", "));
  if (!e.events) {
    e.events = std::make_shared<PythonEvents>();
    e.ex->add_event(e.events);
  }
  e.events->callbacks[event].push_back(fn);
}

py::dict validate(PyExecutor& e, const py::dict& feeds, const std::string& reference,
                  const std::optional<std::string>& loss, std::optional<double> rtol, std::optional<double> atol) {
  const TensorMap in = feeds_of(feeds);
  ForwardCheckOptions o;
  o.rtol = rtol;
  o.atol = atol;
  ForwardCheckResult r;
  {
    py::gil_scoped_release release;
    // The reference runs a copy of the network: a training step changes nothing in it, and the
    // reference's stored values do not replace the executor's.
    Network copy = *e.net;
    auto ref = make_executor(copy, reference);
    r = loss ? test_executor_backprop(*e.ex, in, *loss, *ref, o) : test_executor(*e.ex, in, *ref, o);
    forget_feeds(*e.net, in);
  }
  return check_result(r);
}

PyNetwork create_model(const std::string& name, int64_t batch, int64_t classes,
                       const std::vector<int64_t>& input_shape, bool with_loss, bool training, uint64_t seed,
                       int64_t vocabulary) {
  ModelOptions o;
  o.vocabulary = vocabulary;
  o.batch = batch;
  o.classes = classes;
  o.input_shape = input_shape;
  o.with_loss = with_loss;
  o.training = training;
  o.seed = seed;
  return PyNetwork{std::make_shared<Network>(build_model(name, o))};
}

PyNetwork load_onnx(const std::string& path) {
#ifdef D5_HAVE_ONNX
  return PyNetwork{std::make_shared<Network>(import_onnx_file(path))};
#else
  (void)path;
  throw NotBuilt("this deep500 was built without ONNX (Debian libonnx-dev); d5.load_onnx needs it");
#endif
}

void save_onnx(const PyNetwork& n, const std::string& path) {
#ifdef D5_HAVE_ONNX
  export_onnx_file(*n.net, path);
#else
  (void)n;
  (void)path;
  throw NotBuilt("this deep500 was built without ONNX (Debian libonnx-dev); d5.save_onnx needs it");
#endif
}

py::dict descs_of(const Network& net, const std::vector<std::string>& names) {
  net.infer();
  py::dict d;
  for (const auto& n : names) d[py::str(n)] = net.desc(n).to_string();
  return d;
}

}  // namespace

void bind_networks(py::module_& m) {
  py::class_<PyNetwork>(m, "Network", "A network: a graph of ONNX operators with its parameters")
      .def(py::init([](const std::string& name) { return PyNetwork{std::make_shared<Network>(name)}; }),
           py::arg("name") = "network", "An empty network, built with add_input, add_node, add_output and feed")
      .def(
          "add_input",
          [](PyNetwork& n, const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype) {
            n.net->add_input(name, TensorDesc{parse_dtype(dtype), Shape(shape), Layout::any});
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype") = "f32")
      .def(
          "add_node",
          [](PyNetwork& n, const std::string& op_type, const std::vector<std::string>& inputs,
             const std::vector<std::string>& outputs, const py::dict& attrs, const std::string& name) {
            Node node;
            node.name = name;
            node.op_type = op_type;
            node.inputs = inputs;
            node.outputs = outputs;
            for (const auto& [k, v] : attrs) node.attrs.set(k.cast<std::string>(), attribute_value(k.cast<std::string>(), v));
            return n.net->add_node(std::move(node)).name;
          },
          py::arg("op_type"), py::arg("inputs"), py::arg("outputs"), py::arg("attrs") = py::dict(),
          py::arg("name") = "", "Adds a node (ONNX or registered custom type); returns its name")
      .def("add_output", [](PyNetwork& n, const std::string& name) { n.net->add_output(name); }, py::arg("name"))
      .def_property_readonly("name", [](const PyNetwork& n) { return n.net->name(); })
      .def_property_readonly("inputs", [](const PyNetwork& n) { return descs_of(*n.net, n.net->inputs()); },
                             "Graph inputs: name -> descriptor ('f32[1, 1, 28, 28]')")
      .def_property_readonly("outputs", [](const PyNetwork& n) { return descs_of(*n.net, n.net->outputs()); })
      .def_property_readonly("params", [](const PyNetwork& n) { return n.net->get_params(); })
      .def_property_readonly("nodes",
                             [](const PyNetwork& n) {
                               py::list l;
                               for (const Node& node : n.net->nodes()) l.append(py::make_tuple(node.name, node.op_type));
                               return l;
                             },
                             "(name, op type) of every node, in insertion order")
      .def("fetch", [](const PyNetwork& n, const std::string& name) { return PyTensor{n.net->fetch_tensor(name), py::none()}; },
           py::arg("name"), "A stored value (a parameter, a constant, an executor's last result), shared")
      .def(
          "feed",
          [](PyNetwork& n, const std::string& name, const py::object& value) {
            n.net->feed_tensor(name, to_tensor(value, fmt::format("value of '{}'", name)).clone());
          },
          py::arg("name"), py::arg("value"), "Stores a copy of `value` under `name` (a parameter keeps its descriptor)")
      .def(
          "feed_param",
          [](PyNetwork& n, const std::string& name, const py::object& value) {
            n.net->feed_tensor(name, to_tensor(value, fmt::format("value of '{}'", name)).clone(), true);
          },
          py::arg("name"), py::arg("value"), "Stores a copy of `value` as a trainable parameter")
      .def("__repr__", [](const PyNetwork& n) {
        return fmt::format("d5.Network('{}', {} nodes, {} parameters)", n.net->name(), n.net->nodes().size(),
                           n.net->get_params().size());
      });
  py::class_<PyExecutor>(m, "Executor", "Runs a network on one backend (d5.executor)")
      .def("inference", &run_inference, py::arg("feeds"), "The graph outputs for feeds: input name -> array")
      .def("inference_and_backprop", &run_backprop, py::arg("feeds"), py::arg("loss"),
           "The outputs of a training step's forward; the parameters' gradients are then in gradients()")
      .def("gradients", &gradients, "Parameter -> gradient of the last inference_and_backprop")
      .def("on", &on, py::arg("event"), py::arg("fn"),
           "Calls fn on an event: before_op/after_op get (node, op type, 'forward'|'backward', tensors) and stop "
           "the executor by returning False; the others get a dict of tensors")
      .def_property_readonly("backend", [](const PyExecutor& e) { return e.ex->backend(); })
      .def_property_readonly("network", [](const PyExecutor& e) { return PyNetwork{e.net}; })
      .def_property_readonly("implementations", [](const PyExecutor& e) { return e.ex->implementations(); },
                             "Node -> what runs it")
      .def_property_readonly("fallbacks", [](const PyExecutor& e) { return e.ex->fallbacks(); });
  m.def("_create_model", &create_model, py::arg("name"), py::arg("batch"), py::arg("classes"), py::arg("input_shape"),
        py::arg("with_loss"), py::arg("training"), py::arg("seed"), py::arg("vocabulary") = 0);
  m.def("_list_models", [] {
    py::list l;
    for (const ZooModel& z : zoo_models()) {
      py::dict d;
      d["name"] = z.name;
      d["description"] = z.description;
      d["default_input"] = z.default_input;
      d["default_classes"] = z.default_classes;
      d["default_vocabulary"] = z.default_vocabulary;
      d["per_position"] = z.per_position;
      d["loss"] = z.loss;
      l.append(d);
    }
    return l;
  });
  m.def("_load_onnx", &load_onnx, py::arg("path"));
  m.def("_save_onnx", &save_onnx, py::arg("network"), py::arg("path"));
  m.def(
      "_executor",
      [](const PyNetwork& n, const std::string& backend, bool deterministic) {
        ExecutorOptions o;
        o.deterministic = deterministic;
        return PyExecutor{n.net, make_executor(*n.net, backend, o), nullptr};
      },
      py::arg("network"), py::arg("backend"), py::arg("deterministic"));
  m.def("_test_executor", &validate, py::arg("executor"), py::arg("feeds"), py::arg("reference"), py::arg("loss"),
        py::arg("rtol"), py::arg("atol"));
}

}  // namespace d5::python
