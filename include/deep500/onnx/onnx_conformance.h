#pragma once
// ONNX backend conformance (library d5_onnx_conformance, built when ONNX is found): runs ONNX test
// cases -- a directory with model.onnx and test_data_set_N/{input_i,output_i}.pb, one node or a
// whole model -- through d5 operators created from the OpRegistry (or the backend's graph
// executor), and compares the graph outputs with ONNX's tolerances. Register the operators first
// (register_builtin_operators()).
#include <map>
#include <string>
#include <vector>

#include "deep500/net/network.h"
#include "deep500/metrics/results.h"
#include "deep500/op/validation.h"

namespace d5 {

// How a case's graph runs. Nodes: each node becomes an OpSpec with every input value known and
// runs on its own (operator conformance). Network: the model is imported (onnx_import.h) and run
// by the backend's graph executor when one is registered (make_executor), else node by node
// through operators created from the network's inferred OpSpecs (run_network_nodes). Auto: a
// graph of one node runs as Nodes, a larger one (a whole model) as Network.
enum class CaseRunner { Auto, Nodes, Network };

struct ConformanceOptions {
  std::string backend = "reference";
  std::string filter;           // ECMAScript regex searched in the case names; empty: every case
  Tolerance tol{1e-3, 1e-7};    // onnx.backend.test's assert_allclose tolerances
  // Added to tol.atol for each output: this fraction of its largest finite |expected| value. For
  // whole networks, whose rounding errors scale with the output's magnitude rather than with each
  // element's (an element near zero is a difference of large terms).
  double atol_of_max = 0;
  CaseRunner runner = CaseRunner::Auto;
};

// States: PASSED; FAILED (the worst element and tolerance, a wrong shape or dtype, an operator's
// InvalidArgument, or a malformed case: unreadable model or data files); UNIMPLEMENTED (an
// operator or attribute kind d5 lacks; the message names it); SKIPPED (what the case needs that
// d5 does not run: a non-default operator domain, sequence/optional values, dtypes without a
// d5 dtype or float16/bfloat16).
struct ConformanceCase {
  std::string name;  // the case directory's name: "test_relu"
  std::string path;
  CaseState state = CaseState::Passed;
  std::string detail;
  std::vector<std::string> op_types;  // distinct node op types, in order of appearance
  int opset = 0;                      // the model's default-domain opset; 0 when unreadable
  bool ops_registered = false;        // every op type has an implementation on the backend
  bool exception_listed = false;      // set by apply_exceptions
  bool unexpectedly_passing = false;  // listed as a known failure, but it passed
  // What ran it: "nodes", "network" (imported, node by node through the network's OpSpecs) or
  // "executor" (imported, the backend's graph executor); empty when it did not get that far.
  std::string runner;
};

// Runs an imported network without a graph executor: every node that inference did not fold, in
// topological order, through an operator of `backend` created from net.spec(node). feeds: every
// graph input. Returns the graph outputs. For conformance runs on backends that have no executor.
std::map<std::string, Tensor> run_network_nodes(const Network& net, const std::map<std::string, Tensor>& feeds,
                                                const std::string& backend);

// Case directories (holding model.onnx) under `dir`, recursively, sorted; `dir` itself when it
// is one. IoError when `dir` does not exist.
std::vector<std::string> find_conformance_cases(const std::string& dir);

// Never throws for a problem of the case itself: every d5::Error or std::exception ends as a state.
ConformanceCase run_conformance_case(const std::string& case_dir, const ConformanceOptions& options);

// Every case under `dirs` whose name matches the filter, in order. InvalidArgument for an invalid
// regex, or when no case is found or none matches the filter (a silent empty run would pass).
std::vector<ConformanceCase> run_conformance(const std::vector<std::string>& dirs,
                                             const ConformanceOptions& options);

// Known failures, one per line: "case_name  # justification", or "case_name@N  # ..." for the
// case only when its model is of opset N (ONNX regenerates a case at its newest opset, and the
// expected values of one case name can differ between ONNX releases); blank lines and lines
// starting with '#' are ignored. A missing justification or a duplicate is a FormatError naming
// the line.
using ConformanceExceptions = std::map<std::string, std::string>;  // "name" or "name@N" -> justification
ConformanceExceptions read_conformance_exceptions(const std::string& path);

// A listed case that did not pass becomes SKIPPED with the justification (and its original state
// and detail); a listed case that passed stays PASSED and is marked unexpectedly_passing.
void apply_exceptions(std::vector<ConformanceCase>& cases, const ConformanceExceptions& exceptions);

// Under --require-implemented, a case that fails the run: FAILED, UNIMPLEMENTED although every op
// type it uses is registered on the backend (an implementation refused it), or unexpectedly
// passing (the exceptions list must stay honest).
bool violates_requirement(const ConformanceCase& c);

}  // namespace d5
