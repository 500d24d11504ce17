// The data loader from Python (docs/python.md#data-loaders): d5's DataLoader, whose workers fetch
// and assemble the next batches in C++ without the GIL while Python consumes the current one.
// Iterating gives one epoch's batches as dicts of d5.Tensors; the next iteration starts the next
// epoch. The loader draws from a sampler of its own made like the given one (kind, batch size,
// drop_last, seed), from the first epoch: a loader never moves the sampler it was given.
#include <pybind11/stl.h>

#include "bindings.h"
#include "deep500/core/error.h"
#include "deep500/train/samplers.h"
#include "py_training.h"

namespace d5::python {

namespace {

PyDataLoader make_loader(const PyDataset& dataset, const PySampler& sampler, int64_t prefetch, int workers) {
  D5_CHECK_ARG(sampler.set == dataset.set,
               "data_loader: the sampler draws from another dataset; make it with d5.sampler(name, this dataset, ...)");
  std::unique_ptr<Sampler> own = make_sampler(sampler.name, *dataset.set, sampler.sampler->batch_size(),
                                               sampler.sampler->drop_last(), sampler.sampler->seed());
  DataLoaderOptions options;
  options.prefetch = prefetch;
  options.workers = workers;
  return PyDataLoader{dataset.set, std::make_shared<DataLoader>(*dataset.set, std::move(own), options)};
}

py::dict next_batch(PyDataLoader& l) {
  std::optional<Batch> batch;
  {
    py::gil_scoped_release release;
    batch = l.loader->next();
  }
  if (!batch) {
    l.epoch_ended = true;
    throw py::stop_iteration();
  }
  return tensors_to_python(*batch);
}

py::list timings(const PyDataLoader& l) {
  py::list out;
  for (const BatchTiming& t : l.loader->timings()) {
    py::dict d;
    d["fetch_s"] = t.fetch_s;
    d["transform_s"] = t.transform_s;
    d["copy_s"] = t.copy_s;
    d["produce_s"] = t.produce_s;
    d["wait_s"] = t.wait_s;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_data_loader(py::module_& m) {
  py::class_<PyDataLoader>(m, "DataLoader",
                           "Batches of a dataset in a sampler's order, produced ahead by C++ workers (d5.data_loader)")
      .def(
          "__iter__",
          [](PyDataLoader& l) -> PyDataLoader& {
            if (l.epoch_ended) {
              l.loader->start_next_epoch();
              l.epoch_ended = false;
            }
            return l;
          },
          py::return_value_policy::reference_internal,
          "Iterates over the rest of the current epoch; after an epoch's end, over the next epoch")
      .def("__next__", &next_batch)
      .def(
          "start_next_epoch",
          [](PyDataLoader& l) {
            l.loader->start_next_epoch();
            l.epoch_ended = false;
          },
          "Drops what is left of the current epoch and begins the next")
      .def_property_readonly("epoch", [](const PyDataLoader& l) { return l.loader->epoch(); })
      .def_property_readonly("batch_size", [](const PyDataLoader& l) { return l.loader->batch_size(); })
      .def_property_readonly("batches_per_epoch", [](PyDataLoader& l) { return l.loader->batches_per_epoch(); })
      .def_property_readonly("prefetch", [](const PyDataLoader& l) { return l.loader->options().prefetch; })
      .def_property_readonly("workers", [](const PyDataLoader& l) { return l.loader->options().workers; })
      .def_property_readonly("dataset", [](const PyDataLoader& l) { return PyDataset{l.set}; })
      .def_property_readonly("last_indices", [](const PyDataLoader& l) { return l.loader->last_indices(); },
                             "The dataset indices of the last batch handed out")
      .def_property_readonly(
          "state",
          [](const PyDataLoader& l) {
            const SamplerState s = l.loader->state();
            return std::make_pair(s.epoch, s.batch);
          },
          "(epoch, batches of it handed out): restore(state) on a new loader continues from here")
      .def(
          "restore",
          [](PyDataLoader& l, const std::pair<int64_t, int64_t>& state) {
            l.loader->restore(SamplerState{state.first, state.second});
            l.epoch_ended = false;
          },
          py::arg("state"))
      .def_property_readonly("timings", &timings,
                             "Per batch handed out: fetch_s, transform_s, copy_s, produce_s (their sum) and wait_s "
                             "(how long the consumer waited for it), seconds");
  m.def("_data_loader", &make_loader, py::arg("dataset"), py::arg("sampler"), py::arg("prefetch"),
        py::arg("workers"));
}

}  // namespace d5::python
