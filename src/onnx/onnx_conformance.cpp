// The ONNX conformance runner: ONNX test cases through d5 operators, one node at a time, or whole
// models through the importer and the backend's graph executor.
#include "deep500/onnx/onnx_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/net/graph_executor.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/onnx/onnx_io.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/op_traits.h"

namespace d5 {

namespace fs = std::filesystem;
using namespace onnx_io;

namespace {

// Thrown (and caught in run_conformance_case) when a case needs something d5 does not run.
struct SkipCase {
  std::string reason;
};

// Why d5 cannot hold a value of this type, or "" when it can.
std::string unsupported_type(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const int32_t et = t.tensor_type().elem_type();
      if (!has_d5_dtype(et)) return fmt::format("a {} tensor (d5 has no such dtype)", onnx_type_name(et));
      if (et == kFloat16 || et == kBfloat16)
        return fmt::format("a {} tensor (no d5 backend computes 16-bit floats in conformance runs)",
                           onnx_type_name(et));
      return "";
    }
    case onnx::TypeProto::kSequenceType: return "a sequence (only tensors are supported)";
    case onnx::TypeProto::kOptionalType: return "an optional (only tensors are supported)";
    case onnx::TypeProto::kMapType: return "a map (only tensors are supported)";
    case onnx::TypeProto::kSparseTensorType: return "a sparse tensor (only dense tensors are supported)";
    default: return "of an unknown type (only tensors are supported)";
  }
}

// Everything that makes the case SKIPPED is decided before any operator runs.
void check_runnable(const onnx::GraphProto& g) {
  for (const auto& n : g.node())
    if (!is_default_domain(n.domain()))
      throw SkipCase{fmt::format("node '{}' ({}) is in domain '{}'; only the default ONNX domain is run",
                                 n.name(), n.op_type(), n.domain())};
  for (const auto* list : {&g.input(), &g.output()})
    for (const auto& v : *list)
      if (auto why = unsupported_type(v.type()); !why.empty())
        throw SkipCase{fmt::format("{} '{}' is {}", list == &g.input() ? "input" : "output", v.name(), why)};
  for (const auto& t : g.initializer()) {
    if (!has_d5_dtype(t.data_type()))
      throw SkipCase{fmt::format("initializer '{}' is {} (d5 has no such dtype)", t.name(),
                                 onnx_type_name(t.data_type()))};
  }
}

// A data file that d5 cannot represent (external data, a dtype d5 lacks) skips the case; a
// malformed one fails it.
Tensor read_case_tensor(const fs::path& p) {
  try {
    return read_tensor_file(p.string());
  } catch (const Unimplemented& e) {
    throw SkipCase{e.what()};
  }
}

std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<std::pair<long, fs::path>> sets;
  const std::string prefix = "test_data_set_";
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind(prefix, 0) != 0) continue;
    char* end = nullptr;
    const long n = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (*end == '\0' && end != name.c_str() + prefix.size()) sets.emplace_back(n, e.path());
  }
  std::sort(sets.begin(), sets.end());
  std::vector<fs::path> out;
  for (auto& s : sets) out.push_back(std::move(s.second));
  return out;
}

// input_0.pb, input_1.pb, ... (or output_*) until the first gap.
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& stem) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / fmt::format("{}_{}.pb", stem, i);
    if (!fs::exists(p)) return out;
    out.push_back(std::move(p));
  }
}

using Values = std::map<std::string, Tensor>;

void run_node(const onnx::NodeProto& node, int64_t opset, const std::string& backend, Values& values) {
  OpSpec spec;
  spec.type = node.op_type();
  spec.name = node.name();
  spec.attrs = attributes_from_node(node);
  spec.opset = static_cast<int>(opset);
  spec.num_outputs = node.output_size();
  // Trailing "" inputs are the same as omitted ones; inner ones are absent optional inputs.
  int n_in = node.input_size();
  while (n_in > 0 && node.input(n_in - 1).empty()) --n_in;
  std::vector<Tensor> inputs;
  for (int i = 0; i < n_in; ++i) {
    const std::string& name = node.input(i);
    if (name.empty()) {
      inputs.emplace_back();
      spec.inputs.emplace_back();
      spec.input_values.emplace_back();
      spec.present.push_back(false);
      continue;
    }
    auto it = values.find(name);
    D5_CHECK(it != values.end(), FormatError, "{}: input '{}' is neither a graph input, an initializer nor the "
             "output of an earlier node", spec.label(), name);
    inputs.push_back(it->second);
    spec.inputs.push_back(it->second.desc());
    spec.input_values.emplace_back(it->second);  // every value of a conformance case is known
    spec.present.push_back(true);
  }
  auto op = OpRegistry::global().create(spec, backend);
  // A backend on another device (a GPU) gets copies of the inputs there; values stay on the host.
  auto outputs = to_device(op->run_forward(to_device(inputs, op->device())), Device::cpu());
  for (int j = 0; j < node.output_size(); ++j) {
    if (node.output(j).empty()) continue;
    D5_CHECK_ARG(static_cast<size_t>(j) < outputs.size(), "{}: the node asks for output {} ('{}'), but the "
                 "operator produced {}", spec.label(), j, node.output(j), outputs.size());
    values[node.output(j)] = std::move(outputs[static_cast<size_t>(j)]);
  }
}

// The graph inputs a data set feeds (not those an initializer gives, as IR < 4 lists both), read
// from input_i.pb in graph order.
std::vector<std::pair<std::string, Tensor>> read_inputs(const onnx::GraphProto& g, const fs::path& set) {
  std::set<std::string> initialized;
  for (const auto& t : g.initializer()) initialized.insert(t.name());
  std::vector<std::string> fed;
  for (const auto& in : g.input())
    if (!initialized.count(in.name())) fed.push_back(in.name());
  const auto in_files = numbered_files(set, "input");
  D5_CHECK(in_files.size() == fed.size(), FormatError, "{} has {} input files, but the graph has {} inputs",
           set.filename().string(), in_files.size(), fed.size());
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < fed.size(); ++i) out.emplace_back(fed[i], read_case_tensor(in_files[i]));
  return out;
}

// The values the graph's nodes write as padded outputs (OpTraits::padded_outputs).
std::set<std::string> padded_values(const onnx::GraphProto& g) {
  std::set<std::string> out;
  for (const auto& n : g.node())
    if (const auto traits = op_traits(n.op_type()))
      for (int j : traits->padded_outputs)
        if (j < n.output_size() && !n.output(j).empty()) out.insert(n.output(j));
  return out;
}

// "" when a padded output holds the expected rows, then padding only; else why not. Its shape is
// a static bound, so it may have more rows than ONNX's output, never fewer: the rows past the
// expected ones are checked, not skipped, so an extra real row fails as a wrong one does.
std::string compare_padded(const std::string& name, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  const auto &a = actual.shape().dims(), &e = expected.shape().dims();
  const bool fits = actual.dtype() == expected.dtype() && !a.empty() && a.size() == e.size() && a[0] >= e[0] &&
                    std::equal(a.begin() + 1, a.end(), e.begin() + 1);
  if (!fits)
    return fmt::format("output '{}' is {}, expected {} (a padded output: at least the expected rows, the other "
                       "dimensions equal)",
                       name, actual.desc().to_string(), expected.desc().to_string());
  Tensor head(expected.desc());
  if (expected.numel() > 0) std::memcpy(head.data(), actual.data(), expected.bytes());
  const auto c = compare_output(head, expected, tol, 0);
  if (c.mismatches > 0)
    return fmt::format("output '{}': {} of {} elements of its first {} rows outside tolerance; worst {}", name,
                       c.mismatches, expected.numel(), e[0], describe_worst(c, expected.shape()));
  const int64_t width = a[0] > 0 ? actual.numel() / a[0] : 1;
  for (int64_t i = expected.numel(); i < actual.numel(); ++i)
    if (actual.get(i) != static_cast<double>(kPaddingValue))
      return fmt::format("output '{}': row {} holds {} at flat {}, but the expected output has {} rows, so every row "
                         "past them must be padding ({})",
                         name, i / width, actual.get(i), i, e[0], kPaddingValue);
  return "";
}

// "" when every graph output matches output_i.pb, else why not.
std::string compare_outputs(const onnx::GraphProto& g, const Values& values, const fs::path& set,
                            const ConformanceOptions& o) {
  const auto padded = padded_values(g);
  const auto out_files = numbered_files(set, "output");
  D5_CHECK(out_files.size() == static_cast<size_t>(g.output_size()), FormatError,
           "{} has {} output files, but the graph has {} outputs", set.filename().string(), out_files.size(),
           g.output_size());
  for (int k = 0; k < g.output_size(); ++k) {
    const std::string& name = g.output(k).name();
    auto it = values.find(name);
    if (it == values.end()) return fmt::format("graph output '{}' was not produced by any node", name);
    const Tensor& actual = it->second;
    const Tensor expected = read_case_tensor(out_files[static_cast<size_t>(k)]);
    Tolerance tol = o.tol;
    if (o.atol_of_max > 0) {
      double largest = 0;
      for (int64_t i = 0; i < expected.numel(); ++i)
        if (std::isfinite(expected.get(i))) largest = std::max(largest, std::abs(expected.get(i)));
      tol.atol += o.atol_of_max * largest;
    }
    if (padded.count(name)) {
      if (auto why = compare_padded(name, actual, expected, tol); !why.empty()) return why;
      continue;
    }
    if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
      return fmt::format("output '{}' is {}, expected {}", name, actual.desc().to_string(),
                         expected.desc().to_string());
    const auto c = compare_output(actual, expected, tol, 0);
    if (c.mismatches > 0)
      return fmt::format("output '{}': {} of {} elements outside tolerance; worst {}", name, c.mismatches,
                         expected.numel(), describe_worst(c, expected.shape()));
  }
  return "";
}

// Operator conformance: each node on its own, every input value known.
std::string run_data_set_nodes(const onnx::GraphProto& g, int64_t opset, const fs::path& dir, const fs::path& set,
                               const ConformanceOptions& o) {
  Values values;
  for (const auto& t : g.initializer())
    values[t.name()] = tensor_from_proto(t, "initializer '" + t.name() + "'", dir.string());
  for (auto& [name, t] : read_inputs(g, set)) values[name] = std::move(t);
  for (const auto& node : g.node()) run_node(node, opset, o.backend, values);
  return compare_outputs(g, values, set, o);
}

// The data set's input shapes give the graph's symbolic dimensions their values.
ImportOptions import_options_for(const onnx::GraphProto& g, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                 const fs::path& dir) {
  ImportOptions io;
  io.base_dir = dir.string();
  for (const auto& feed : feeds) {
    const Tensor& t = feed.second;
    const auto found =
        std::find_if(g.input().begin(), g.input().end(), [&](const auto& v) { return v.name() == feed.first; });
    if (found == g.input().end()) continue;  // a feed the graph does not take: the feed check names it
    const auto* in = &*found;
    if (!in->type().has_tensor_type() || !in->type().tensor_type().has_shape()) continue;
    const auto& dims = in->type().tensor_type().shape().dim();
    if (dims.size() != static_cast<int>(t.shape().rank())) continue;  // the importer or the feed check says so
    for (int k = 0; k < dims.size(); ++k) {
      if (dims[k].has_dim_value()) continue;
      if (dims[k].has_dim_param()) io.dims[dims[k].dim_param()] = t.shape()[static_cast<size_t>(k)];
      else io.input_shapes[feed.first] = t.shape();
    }
  }
  return io;
}

bool has_executor(const std::string& backend) {
  const auto names = executor_backends();
  return std::find(names.begin(), names.end(), backend) != names.end();
}

// A whole model: imported, then run by the backend's executor or node by node.
std::string run_data_set_network(const onnx::ModelProto& model, const fs::path& dir, const fs::path& set,
                                 const ConformanceOptions& o, ConformanceCase& c) {
  const auto& g = model.graph();
  const auto inputs = read_inputs(g, set);
  Network net = import_onnx(model, import_options_for(g, inputs, dir));
  TensorMap feeds;
  for (const auto& [name, t] : inputs) {
    const TensorDesc& want = net.desc(name);
    D5_CHECK(want.dtype == t.dtype() && want.shape == t.shape(), FormatError,
             "{}: the value of graph input '{}' is {}, but the graph declares {}", set.filename().string(), name,
             t.desc().to_string(), want.to_string());
    feeds[name] = t;
  }
  Values outputs;
  if (has_executor(o.backend)) {
    c.runner = "executor";
    outputs = make_executor(net, o.backend)->inference(feeds);
  } else {
    c.runner = "network";
    outputs = run_network_nodes(net, feeds, o.backend);
  }
  return compare_outputs(g, outputs, set, o);
}

void run_case(ConformanceCase& c, const ConformanceOptions& o) {
  const fs::path dir(c.path);
  const auto model = load_model((dir / "model.onnx").string());
  const auto& g = model.graph();
  c.ops_registered = true;
  for (const auto& n : g.node()) {
    if (std::find(c.op_types.begin(), c.op_types.end(), n.op_type()) == c.op_types.end())
      c.op_types.push_back(n.op_type());
    c.ops_registered = c.ops_registered && !OpRegistry::global().implementations(n.op_type(), o.backend).empty();
  }
  check_runnable(g);
  const int64_t opset = default_opset(model);
  c.opset = static_cast<int>(opset);
  const auto sets = data_sets(dir);
  D5_CHECK(!sets.empty(), FormatError, "{}: no test_data_set_N directories", c.path);
  const bool as_network =
      o.runner == CaseRunner::Network || (o.runner == CaseRunner::Auto && g.node_size() > 1);
  if (!as_network) c.runner = "nodes";
  for (const auto& set : sets) {
    const std::string why =
        as_network ? run_data_set_network(model, dir, set, o, c) : run_data_set_nodes(g, opset, dir, set, o);
    if (!why.empty()) {
      c.state = CaseState::Failed;
      c.detail = sets.size() > 1 ? set.filename().string() + ": " + why : why;
      return;
    }
  }
  c.state = CaseState::Passed;
}

}  // namespace

std::map<std::string, Tensor> run_network_nodes(const Network& net, const std::map<std::string, Tensor>& feeds,
                                                const std::string& backend) {
  net.infer();
  Values values;
  for (const auto& name : net.inputs()) {
    auto it = feeds.find(name);
    D5_CHECK_ARG(it != feeds.end(), "network '{}': graph input '{}' is not fed", net.name(), name);
    values[name] = it->second;
  }
  for (const auto& name : net.initializers()) values[name] = net.fetch_tensor(name);
  for (const Node* node : net.topological_order()) {
    if (net.is_folded(node->name)) {
      for (const auto& out : node->outputs)
        if (const Tensor* v = out.empty() ? nullptr : net.known_value(out)) values[out] = *v;
      continue;
    }
    const OpSpec& spec = net.spec(node->name);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      inputs.push_back(spec.has_input(i) ? values.at(node->inputs[i]) : Tensor());
    const auto op = OpRegistry::global().create(spec, backend);
    auto outputs = to_device(op->run_forward(to_device(inputs, op->device())), Device::cpu());
    for (size_t j = 0; j < node->outputs.size() && j < outputs.size(); ++j)
      if (!node->outputs[j].empty()) values[node->outputs[j]] = std::move(outputs[j]);
  }
  Values out;
  for (const auto& name : net.outputs()) out[name] = values.at(name);
  return out;
}

std::vector<std::string> find_conformance_cases(const std::string& dir) {
  std::error_code ec;
  D5_CHECK(fs::is_directory(dir, ec), IoError, "'{}' is not a directory", dir);
  std::vector<std::string> out;
  if (fs::exists(fs::path(dir) / "model.onnx")) return {dir};
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_directory() || !fs::exists(it->path() / "model.onnx")) continue;
    out.push_back(it->path().string());
    it.disable_recursion_pending();  // a case's test_data_set_N folders are not cases
  }
  std::sort(out.begin(), out.end());
  return out;
}

ConformanceCase run_conformance_case(const std::string& case_dir, const ConformanceOptions& options) {
  ConformanceCase c;
  c.path = case_dir;
  c.name = fs::path(case_dir).filename().string();
  if (c.name.empty()) c.name = fs::path(case_dir).parent_path().filename().string();  // "dir/"
  try {
    run_case(c, options);
  } catch (const SkipCase& s) {
    c.state = CaseState::Skipped;
    c.detail = s.reason;
  } catch (const Unimplemented& e) {
    c.state = CaseState::Unimplemented;
    c.detail = e.what();
  } catch (const Error& e) {  // InvalidArgument from an operator, malformed files, ...
    c.state = CaseState::Failed;
    c.detail = e.what();
  } catch (const std::exception& e) {
    c.state = CaseState::Failed;
    c.detail = fmt::format("unexpected error (a bug in deep500 or the operator): {}", e.what());
  }
  return c;
}

std::vector<ConformanceCase> run_conformance(const std::vector<std::string>& dirs, const ConformanceOptions& o) {
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? std::string(".*") : o.filter, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    D5_THROW(InvalidArgument, "--filter '{}' is not a valid regular expression: {}", o.filter, e.what());
  }
  std::vector<ConformanceCase> out;
  size_t found = 0;
  for (const auto& dir : dirs) {
    const auto cases = find_conformance_cases(dir);
    D5_CHECK_ARG(!cases.empty(), "'{}' contains no ONNX test cases (directories with model.onnx)", dir);
    found += cases.size();
    for (const auto& path : cases) {
      const std::string name = fs::path(path).filename().string();
      if (std::regex_search(name, filter)) out.push_back(run_conformance_case(path, o));
    }
  }
  D5_CHECK_ARG(!out.empty(), "none of the {} cases matches --filter '{}'", found, o.filter);
  return out;
}

ConformanceExceptions read_conformance_exceptions(const std::string& path) {
  std::ifstream in(path);
  D5_CHECK(in.good(), IoError, "cannot open '{}'", path);
  ConformanceExceptions ex;
  std::string line;
  int line_no = 0;
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  };
  while (std::getline(in, line)) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const auto hash = line.find('#');
    const std::string name = trim(line.substr(0, hash));
    const std::string why = hash == std::string::npos ? "" : trim(line.substr(hash + 1));
    D5_CHECK(name.find_first_of(" \t") == std::string::npos, FormatError,
             "{}:{}: '{}' is not one case name; write 'case_name  # justification'", path, line_no, name);
    if (const auto at = name.find('@'); at != std::string::npos) {
      const std::string opset = name.substr(at + 1);
      D5_CHECK(at > 0 && !opset.empty() && opset.find_first_not_of("0123456789") == std::string::npos, FormatError,
               "{}:{}: '{}' is not 'case_name@opset' (an opset is a number)", path, line_no, name);
    }
    D5_CHECK(!why.empty(), FormatError, "{}:{}: '{}' has no justification; write 'case_name  # why it fails'",
             path, line_no, name);
    D5_CHECK(ex.emplace(name, why).second, FormatError, "{}:{}: '{}' is listed twice", path, line_no, name);
  }
  return ex;
}

void apply_exceptions(std::vector<ConformanceCase>& cases, const ConformanceExceptions& exceptions) {
  for (auto& c : cases) {
    auto it = exceptions.find(fmt::format("{}@{}", c.name, c.opset));
    if (it == exceptions.end()) it = exceptions.find(c.name);
    if (it == exceptions.end()) continue;
    c.exception_listed = true;
    if (c.state == CaseState::Passed) {
      c.unexpectedly_passing = true;
      c.detail = fmt::format("listed as a known failure ({}) but passes: remove it from the exceptions", it->second);
    } else if (c.state != CaseState::Skipped) {
      c.detail = fmt::format("known failure: {} (was {}: {})", it->second, to_string(c.state), c.detail);
      c.state = CaseState::Skipped;
    }
  }
}

bool violates_requirement(const ConformanceCase& c) {
  return c.state == CaseState::Failed || c.state == CaseState::Mistrusted ||
         (c.state == CaseState::Unimplemented && c.ops_registered) || c.unexpectedly_passing;
}

}  // namespace d5
