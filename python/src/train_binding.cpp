// Level 2 from Python: datasets, samplers, optimizers (built-in, and update rules written in
// Python driven by the C++ trainer), the trainer and test_training. Training releases the GIL; a
// Python update rule takes it for each parameter and gets NumPy views of the network's own
// parameter and gradient buffers (no copy: it updates the parameter in place).
#include <pybind11/stl.h>

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"
#include "deep500/train/dataset.h"
#include "deep500/net/model_zoo.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/optimizer_validation.h"
#include "deep500/train/quality_target.h"
#include "deep500/train/sampler.h"
#include "deep500/train/samplers.h"
#include "deep500/train/trainer.h"
#include "py_network.h"
#include "py_training.h"
#include "py_tensor.h"

namespace d5::python {

namespace {

struct PyOptimizer {
  std::shared_ptr<Optimizer> opt;
  PyExecutor executor;
};

// An update rule whose update(param, grad, name) is Python (d5.UpdateRule._apply), one parameter
// at a time on the trainer's thread.
class PythonRuleOptimizer final : public UpdateRuleOptimizer {
 public:
  PythonRuleOptimizer(py::object rule, Hyperparameters hyper)
      : UpdateRuleOptimizer(hyper, {}), rule_(std::move(rule)) {
    py::gil_scoped_acquire gil;
    name_ = "python:" + std::string(py::str(rule_.get_type().attr("__qualname__")));
  }
  ~PythonRuleOptimizer() override { release_python_object(rule_); }
  std::string name() const override { return name_; }
  void update_rule(const Tensor& grad, Tensor& param, const std::string& name) override {
    D5_CHECK_ARG(param.on_host() && grad.on_host(), "{}: parameter '{}' lives on {}; Python update rules run on "
                 "host tensors", name_, name, param.device().to_string());
    py::gil_scoped_acquire gil;
    py::module_ np = py::module_::import("numpy");
    rule_.attr("_apply")(name, np.attr("asarray")(PyTensor{param, py::none()}),
                         np.attr("asarray")(PyTensor{grad, py::none()}), current_learning_rate());
  }
  // One parameter after another on this thread: the rule is Python, a parallel region would only
  // queue its threads on the GIL.
  void update_all(std::vector<ParameterUpdate>& updates) override {
    for (auto& u : updates) update_rule(u.grad, u.param, u.name);
  }

 private:
  py::object rule_;
  std::string name_;
};

// Python functions following a training run; a bool-returning hook stops it on False.
class PythonTrainingEvents final : public TrainingEvent {
 public:
  explicit PythonTrainingEvents(const std::vector<std::pair<std::string, py::function>>& callbacks) {
    for (const auto& [event, fn] : callbacks) {
      D5_CHECK_ARG(std::find(kTrainingEvents.begin(), kTrainingEvents.end(), event) != kTrainingEvents.end(),
                   "no training event '{}' (events: {})", event, fmt::join(kTrainingEvents, ", "));
      callbacks_[event].push_back(fn);
    }
  }
  ~PythonTrainingEvents() override {
    for (auto& [event, fns] : callbacks_)
      for (auto& fn : fns) release_python_object(fn);
  }
  bool before_training(const TrainingProgress& p) override { return call("before_training", p); }
  void after_training(const TrainingProgress& p) override { call("after_training", p); }
  bool before_epoch(const TrainingProgress& p) override { return call("before_epoch", p); }
  bool after_epoch(const TrainingProgress& p) override { return call("after_epoch", p); }
  bool before_batch(const TrainingProgress& p, const Batch& batch) override {
    return call("before_batch", p, [&] { return py::object(tensors_to_python(batch)); });
  }
  bool after_batch(const TrainingProgress& p, const TensorMap& outputs) override {
    return call("after_batch", p, [&] { return py::object(tensors_to_python(outputs)); });
  }
  bool before_test(const TrainingProgress& p) override { return call("before_test", p); }
  bool after_test(const TrainingProgress& p, double value) override {
    return call("after_test", p, [&] { return py::object(py::float_(value)); });
  }

  static inline const std::vector<std::string> kTrainingEvents = {
      "before_training", "after_training", "before_epoch", "after_epoch",
      "before_batch",    "after_batch",    "before_test",  "after_test"};

 private:
  static py::dict progress(const TrainingProgress& p) {
    py::dict d;
    d["epoch"] = p.epoch;
    d["step"] = p.step;
    d["samples"] = p.samples;
    d["training_time_s"] = p.training_time_s;
    d["wall_time_s"] = p.wall_time_s;
    d["last_loss"] = p.last_loss;
    d["last_test_quality"] = p.last_test_quality;
    return d;
  }
  bool call(const char* event, const TrainingProgress& p, const std::function<py::object()>& extra = {}) {
    const auto it = callbacks_.find(event);
    if (it == callbacks_.end()) return true;
    py::gil_scoped_acquire gil;
    const py::dict d = progress(p);
    bool go_on = true;
    for (const auto& fn : it->second) {
      const py::object r = extra ? fn(d, extra()) : fn(d);
      if (!r.is_none() && !r.cast<bool>()) go_on = false;
    }
    return go_on;
  }
  std::map<std::string, std::vector<py::function>> callbacks_;
};

// A Python rule under an optimizer name for test_optimizer: each optimizer it makes runs on a
// deep copy of the rule, its hyper-parameters set as the copy's attributes (lr as the rate).
std::string register_rule(const py::object& rule) {
  const std::string name = "python:" + std::string(py::str(rule.get_type().attr("__qualname__")));
  auto* keep = new py::object(rule);  // kept for the registry's lifetime, past the interpreter's (as custom ops)
  register_optimizer(name, "an update rule written in Python", [keep](const Hyperparameters& hyper) {
    py::gil_scoped_acquire gil;
    py::object copy = py::module_::import("copy").attr("deepcopy")(*keep);
    for (const auto& [k, v] : hyper) py::setattr(copy, k == "lr" ? "base_lr" : k.c_str(), py::float_(v));
    const double lr = copy.attr("base_lr").cast<double>();
    return std::unique_ptr<Optimizer>(std::make_unique<PythonRuleOptimizer>(copy, Hyperparameters{{"lr", lr}}));
  });
  return name;
}

py::dict compare_optimizers(const py::object& optimizer, const std::string& twin, const std::string& model,
                            int64_t batch, const py::dict& feeds, const Hyperparameters& hyper, int64_t steps,
                            const std::string& backend, uint64_t seed) {
  const std::string name = py::isinstance<py::str>(optimizer) ? optimizer.cast<std::string>() : register_rule(optimizer);
  TensorMap in;
  for (const auto& [k, v] : feeds) {
    const auto key = k.cast<std::string>();
    in[key] = to_tensor(v, "feed", -1).clone();
  }
  OptimizerTestOptions o;
  o.hyper = hyper;
  o.steps = steps;
  o.backend = backend;
  OptimizerComparison c;
  {
    py::gil_scoped_release release;
    ModelOptions mo;
    mo.batch = batch;
    mo.with_loss = true;
    mo.seed = seed;
    c = test_optimizer(name, twin, [&] { return build_model(model, mo); }, in, o);
  }
  py::dict d;
  d["optimizer"] = c.optimizer;
  d["twin"] = c.twin;
  d["backend"] = c.backend;
  d["steps"] = c.steps;
  d["relative_difference"] = c.relative_difference;
  d["max_relative_difference"] = c.max_relative_difference;
  d["worst_parameter"] = c.worst_parameter;
  return d;
}

PyDataset open(const std::string& name, const std::string& data_dir, const std::string& split, uint64_t seed,
               const std::map<std::string, std::string>& options) {
  DatasetSpec spec;
  spec.name = name;
  spec.data_dir = data_dir;
  spec.split = split;
  spec.seed = seed;
  spec.options = options;
  return PyDataset{std::shared_ptr<Dataset>(open_dataset(spec))};
}

py::dict fetch(const PyDataset& d, const std::vector<int64_t>& indices) {
  Batch b;
  {
    py::gil_scoped_release release;
    b = d.set->fetch(indices);
  }
  return tensors_to_python(b);
}

PyOptimizer make(const std::string& name, const PyExecutor& executor, const Hyperparameters& hyper) {
  return PyOptimizer{std::shared_ptr<Optimizer>(make_optimizer(name, hyper)), executor};
}

PyOptimizer make_python_rule(const py::object& rule, const PyExecutor& executor, double lr) {
  return PyOptimizer{std::make_shared<PythonRuleOptimizer>(rule, Hyperparameters{{"lr", lr}}), executor};
}

py::dict step(PyOptimizer& o, const py::dict& feeds, const std::string& loss) {
  TensorMap in;
  for (const auto& [k, v] : feeds) {
    const auto name = k.cast<std::string>();
    in[name] = to_tensor(v, fmt::format("feed '{}'", name));
  }
  TensorMap out;
  {
    py::gil_scoped_release release;
    out = o.opt->step(*o.executor.ex, in, loss);
    for (const auto& [name, t] : in)
      if (!o.executor.net->is_initializer(name)) o.executor.net->release_value(name);
  }
  return tensors_to_python(out);
}

// `batches`: a d5.Sampler over train_set (batches fetched in the step), or a d5.DataLoader
// (produced ahead by its workers; its dataset is the training set).
py::dict train(PyOptimizer& o, const std::optional<PyDataset>& train_set, const std::optional<PyDataset>& test_set,
               const py::object& batches, int64_t epochs, int64_t max_steps, const std::optional<std::string>& target,
               const std::vector<std::string>& quality, double time_limit,
               const std::vector<std::pair<std::string, py::function>>& events) {
  auto python_events = std::make_shared<PythonTrainingEvents>(events);
  TrainingOptions options;
  options.epochs = epochs;
  options.max_steps = max_steps;
  options.quality = quality;
  options.time_limit_s = time_limit;
  if (target) options.target = parse_quality_target(*target);
  PySampler* sampler = py::isinstance<PySampler>(batches) ? batches.cast<PySampler*>() : nullptr;
  PyDataLoader* loader = py::isinstance<PyDataLoader>(batches) ? batches.cast<PyDataLoader*>() : nullptr;
  D5_CHECK_ARG(sampler || loader, "Trainer: batches come from a d5.Sampler or a d5.DataLoader, not a {}",
               py::str(py::type::of(batches).attr("__name__")).cast<std::string>());
  D5_CHECK_ARG(!sampler || train_set, "Trainer: a sampler needs the dataset it draws from");
  D5_CHECK_ARG(!loader || !train_set || train_set->set == loader->set,
               "Trainer: the data loader reads another dataset than the one given; give the loader alone");
  const Dataset* test = test_set ? test_set->set.get() : nullptr;
  CaseResult c;
  {
    py::gil_scoped_release release;
    std::optional<Trainer> trainer;
    if (sampler)
      trainer.emplace(*o.executor.ex, *train_set->set, test, *o.opt, *sampler->sampler, options);
    else
      trainer.emplace(*o.executor.ex, *loader->loader, test, *o.opt, options);
    if (!events.empty()) trainer->add_event(python_events);
    const TrainingResult r = trainer->train();
    c = training_case(o.executor.net->name(), o.executor.ex->backend(), options, r);
  }
  return py::cast<py::dict>(json_to_python(to_json(c).dump()));
}

}  // namespace

void bind_training(py::module_& m) {
  py::class_<PyDataset>(m, "Dataset", "A dataset of d5's formats (d5.dataset)")
      .def("__len__", [](const PyDataset& d) { return d.set->size(); })
      .def_property_readonly("name", [](const PyDataset& d) { return d.set->name(); })
      .def_property_readonly("classes", [](const PyDataset& d) { return d.set->classes(); })
      .def_property_readonly("vocabulary", [](const PyDataset& d) { return d.set->vocabulary(); },
                             "Token ids of a text set lie in [0, vocabulary); 0 for other sets")
      .def_property_readonly("sample_descs",
                             [](const PyDataset& d) {
                               std::map<std::string, std::string> out;
                               for (const auto& [k, v] : d.set->sample_descs()) out[k] = v.to_string();
                               return out;
                             })
      .def("fetch", &fetch, py::arg("indices"), "The samples at `indices` as a batch: name -> tensor");
  py::class_<PySampler>(m, "Sampler", "Picks each batch's indices (d5.sampler)")
      .def_property_readonly("batch_size", [](const PySampler& s) { return s.sampler->batch_size(); });
  py::class_<PyOptimizer>(m, "Optimizer", "An optimizer bound to an executor (d5.optimizer)")
      .def("step", &step, py::arg("feeds"), py::arg("loss") = "loss",
           "One training step on feeds: forward, backward, update; the outputs")
      .def_property_readonly("name", [](const PyOptimizer& o) { return o.opt->name(); })
      .def_property_readonly("steps", [](const PyOptimizer& o) { return o.opt->steps(); })
      .def_property_readonly("learning_rate", [](const PyOptimizer& o) { return o.opt->learning_rate(); });
  m.def("_dataset", &open, py::arg("name"), py::arg("data_dir"), py::arg("split"), py::arg("seed"),
        py::arg("options"));
  m.def(
      "_sampler",
      [](const std::string& name, const PyDataset& d, int64_t batch, uint64_t seed, bool drop_last) {
        return PySampler{std::shared_ptr<Sampler>(make_sampler(name, *d.set, batch, drop_last, seed)), d.set, name};
      },
      py::arg("name"), py::arg("dataset"), py::arg("batch"), py::arg("seed"), py::arg("drop_last"));
  m.def("_optimizer", &make, py::arg("name"), py::arg("executor"), py::arg("hyper"));
  m.def("_python_rule_optimizer", &make_python_rule, py::arg("rule"), py::arg("executor"), py::arg("lr"));
  m.def("_train", &train, py::arg("optimizer"), py::arg("train_set"), py::arg("test_set"), py::arg("batches"),
        py::arg("epochs"), py::arg("max_steps"), py::arg("target"), py::arg("quality"), py::arg("time_limit"),
        py::arg("events"));
  m.def("_test_optimizer", &compare_optimizers, py::arg("optimizer"), py::arg("twin"), py::arg("model"),
        py::arg("batch"), py::arg("feeds"), py::arg("hyper"), py::arg("steps"), py::arg("backend"), py::arg("seed"));
  m.def("_optimizer_names", &optimizer_names);
}

}  // namespace d5::python
