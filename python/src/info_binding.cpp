// d5.info() and d5.__version__; d5.load_results(): JSON documents of the C++ side as dicts.
#include "bindings.h"
#include "deep500/core/build_info.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/results.h"

namespace d5::python {

py::object json_to_python(const std::string& dumped) {
  return py::module_::import("json").attr("loads")(dumped);
}

void bind_info(py::module_& m) {
  m.attr("__version__") = build_info().version;
  m.def(
      "_manifest",
      [] {
        ExperimentSettings settings;
        return json_to_python(make_manifest(settings).dump());
      },
      "The manifest every d5 result carries: machine, build, backends, libraries");
  m.def(
      "_load_results", [](const std::string& path) { return json_to_python(to_json(read_results(path)).dump()); },
      py::arg("path"), "A result file, checked as d5 reads it (FormatError when it is not one)");
}

}  // namespace d5::python
