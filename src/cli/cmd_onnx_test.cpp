// d5 onnx-test: ONNX backend node test cases through d5 operators (see docs/onnx-test.md).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/op/op_registry.h"
#endif

namespace d5::cli {

namespace {

struct OnnxTestOptions {
  OutputOptions out;
  std::vector<std::string> dirs;
  std::string backend = "reference";
  std::string filter;
  std::string exceptions;
  bool require_implemented = false;
  std::string run_as = "auto";
  double rtol = 1e-3;
  double atol = 1e-7;
  double atol_of_max = 0;
};

#ifdef D5_HAVE_ONNX
int run_onnx_test(const OnnxTestOptions& o) {
  using nlohmann::json;
  if (!find_backend(o.backend)) {
    std::vector<std::string> names;
    for (const auto& b : backends()) names.push_back(b.name);
    if (is_not_built_backend(o.backend))
      D5_THROW(NotBuilt, "--backend '{}': this d5 was built without it; install its dependency and reconfigure "
               "(docs/building.md; built: {})", o.backend, fmt::join(names, ", "));
    D5_THROW(InvalidArgument, "--backend '{}' is not a deep500 backend (built: {})", o.backend,
             fmt::join(names, ", "));
  }
  // Read first, so that a bad exceptions file fails before a long run.
  const auto exceptions = o.exceptions.empty() ? ConformanceExceptions{} : read_conformance_exceptions(o.exceptions);
  register_builtin_operators();
  ConformanceOptions co;
  co.backend = o.backend;
  co.filter = o.filter;
  co.tol = Tolerance{o.rtol, o.atol};
  co.atol_of_max = o.atol_of_max;
  co.runner = o.run_as == "nodes" ? CaseRunner::Nodes : o.run_as == "network" ? CaseRunner::Network : CaseRunner::Auto;
  auto cases = run_conformance(o.dirs, co);
  apply_exceptions(cases, exceptions);

  int passed = 0, failed = 0, skipped = 0, unimplemented = 0;
  std::vector<std::string> unexpected, violations, failing;  // failing: what makes the exit code 1
  std::string text;
  json jcases = json::array();
  for (const auto& c : cases) {
    switch (c.state) {
      case CaseState::Passed: ++passed; break;
      case CaseState::Skipped: ++skipped; break;
      case CaseState::Unimplemented: ++unimplemented; break;
      default: ++failed; break;  // FAILED (MISTRUSTED does not occur: there is no degenerate-reference rule)
    }
    if (c.unexpectedly_passing) unexpected.push_back(c.name);
    if (violates_requirement(c)) violations.push_back(c.name);
    if (c.state == CaseState::Failed || (o.require_implemented && violates_requirement(c))) failing.push_back(c.name);
    if (c.state != CaseState::Passed) text += fmt::format("{}  {}  {}\n", c.name, to_string(c.state), c.detail);
    jcases.push_back({{"name", c.name},
                      {"state", to_string(c.state)},
                      {"detail", c.detail},
                      {"ops", c.op_types},
                      {"runner", c.runner}});
  }
  if (!unexpected.empty())
    text += fmt::format("{} unexpectedly passing (listed in {}; remove them): {}\n", unexpected.size(),
                        o.exceptions, fmt::join(unexpected, ", "));
  if (o.require_implemented && !violations.empty())
    text += fmt::format("{} case(s) violate --require-implemented (failed, refused by a registered operator, or "
                        "listed but passing): {}\n", violations.size(), fmt::join(violations, ", "));
  text += fmt::format("{} passed, {} failed, {} skipped\n{} unimplemented\n", passed, failed, skipped,
                      unimplemented);

  json summary = {{"passed", passed},       {"failed", failed}, {"skipped", skipped},
                  {"unimplemented", unimplemented}, {"total", cases.size()}, {"backend", o.backend},
                  {"unexpectedly_passing", unexpected}, {"rtol", o.rtol}, {"atol", o.atol},
                  {"atol_of_max", o.atol_of_max}};
  if (o.require_implemented) summary["requirement_violations"] = violations;
  emit_text(text, {{"cases", jcases}, {"summary", summary}}, o.out);
  if (!failing.empty() && (o.out.format == "json" || !o.out.output.empty())) {
    // The report is JSON or in a file: one line on stderr names the cases to look at.
    const size_t n = failing.size();
    failing.resize(std::min<size_t>(n, 10));
    std::cerr << fmt::format("d5: onnx-test: {} case(s) fail the run: {}{}\n", n, fmt::join(failing, ", "),
                             n > failing.size() ? ", ..." : "");
  }
  return failing.empty() ? kExitOk : kExitFailed;
}
#endif

}  // namespace

Command register_onnx_test(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("onnx-test", "Run ONNX backend test cases (model.onnx + test_data_set_N) "
                                              "through d5 operators");
  auto o = std::make_shared<OnnxTestOptions>();
  cmd->add_option("DIR", o->dirs, "Directories searched recursively for test cases")->required();
  cmd->add_option("--backend", o->backend, "Backend whose operators run the cases")->default_val("reference");
  cmd->add_option("--filter", o->filter, "Run only cases whose name matches this regular expression (searched)");
  cmd->add_option("--exceptions", o->exceptions,
                  "Known failures: lines 'case_name  # justification'; listed failures become SKIPPED");
  cmd->add_option("--run-as", o->run_as,
                  "nodes: each node on its own (operator conformance); network: import the model and run it "
                  "with the backend's executor (node by node where it has none); auto: nodes for one-node "
                  "graphs, network for larger ones")
      ->check(CLI::IsMember({"auto", "nodes", "network"}))
      ->default_val("auto");
  cmd->add_option("--rtol", o->rtol, "Relative tolerance: |actual - expected| <= atol + rtol * |expected|")
      ->check(CLI::NonNegativeNumber)
      ->default_val(1e-3);
  cmd->add_option("--atol", o->atol, "Absolute tolerance")->check(CLI::NonNegativeNumber)->default_val(1e-7);
  cmd->add_option("--atol-of-max", o->atol_of_max,
                  "Add to --atol this fraction of each output's largest |expected| value (whole networks)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  cmd->add_flag("--require-implemented", o->require_implemented,
                "Also exit 1 when a case of registered operators is UNIMPLEMENTED, or a listed case passes");
  add_output_options(*cmd, o->out);
  return {cmd, [o]() -> int {
#ifdef D5_HAVE_ONNX
            return run_onnx_test(*o);
#else
            D5_THROW(NotBuilt, "this d5 was built without ONNX support: install libonnx-dev and "
                     "libprotobuf-dev, then reconfigure (D5_WITH_ONNX=AUTO or ON)");
#endif
          }};
}

}  // namespace d5::cli
