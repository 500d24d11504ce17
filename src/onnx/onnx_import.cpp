// ONNX ModelProto -> d5::Network: one visitor per op type, checked against ONNX's schemas.
#include "deep500/onnx/onnx_import.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include "deep500/core/error.h"
#include "deep500/op/op_traits.h"
#include "deep500/onnx/onnx_io.h"
#include "onnx_newer_schemas.h"

namespace d5 {

namespace {

using namespace onnx_io;

struct ImportContext {
  Network& net;
  int opset;
  const ImportOptions& options;
  // Outputs a visitor dropped: nothing may read them (checked once every node is in).
  std::map<std::string, std::string> dropped_outputs;  // tensor -> why
};

std::string node_label(const Node& n) { return fmt::format("node '{}' ({})", n.name, n.op_type); }

// A visitor checks a node that passed its ONNX schema and rewrites it into the form the network
// (and d5's operators, which read Network::opset()) take.
using NodeVisitor = void (*)(ImportContext&, Node&);

// The node's form at the model's opset is what d5's operators take (they accept both the
// attribute and the input forms of Split/Squeeze/Unsqueeze/Reduce* axes, Clip's bounds, Pad's
// pads, Slice's starts and Dropout's ratio, by opset).
void visit_as_is(ImportContext&, Node&) {}

// Before opset 14, a BatchNormalization with 5 outputs (Y, mean, var, saved mean, saved inverse
// deviation) is in training mode; d5 spells that the opset-14 way, training_mode=1 with 3 outputs,
// which the exporter turns back. The saved statistics only served old training graphs' backward
// nodes, which d5 does not import, so nothing may read them.
void visit_batch_normalization(ImportContext& c, Node& n) {
  if (c.opset >= 14 || n.outputs.size() <= 1) return;
  for (size_t k = 3; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty())
      c.dropped_outputs[n.outputs[k]] =
          fmt::format("{} of {} (opset < 14 training), which d5 does not compute; d5 computes "
                      "BatchNormalization's training outputs as opset 14 defines them (Y, running mean, running var)",
                      k == 3 ? "the saved mean" : "the saved inverse standard deviation", node_label(n));
  n.outputs.resize(3);
  n.attrs.set("training_mode", int64_t{1});
}

// Constant's string and sparse forms hold what d5 tensors cannot.
void visit_constant(ImportContext&, Node& n) {
  for (const char* a : {"value_string", "value_strings", "sparse_value"})
    D5_CHECK(!n.attrs.has(a), Unimplemented, "{}: attribute '{}' is not supported (d5 tensors hold dense numbers)",
             node_label(n), a);
}

// The types whose ONNX form needs more than taking the node as it is; every other type with
// traits (op/op_traits.h) and an ONNX opset up to kMaxImportOpset is imported as it is.
const std::map<std::string, NodeVisitor>& special_visitors() {
  static const std::map<std::string, NodeVisitor> table = {
      {"BatchNormalization", visit_batch_normalization},
      {"Constant", visit_constant},
  };
  return table;
}

// The visitor of an importable type, or null.
NodeVisitor visitor_of(const std::string& type) {
  const auto traits = op_traits(type);
  if (!traits || traits->onnx_since < 1 || traits->onnx_since > kMaxImportOpset) return nullptr;
  const auto& special = special_visitors();
  auto it = special.find(type);
  return it == special.end() ? visit_as_is : it->second;
}

// The first line of an ONNX checker message (the rest repeats the node).
std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Checks the node against ONNX's schema of its op type at the opset: input/output counts,
// required and unknown attributes, attribute types.
// Versions the linked ONNX library does not know (opsets past 17 with ONNX 1.12) are checked
// against d5's copy of their schemas (onnx_newer_schemas.h).
void check_schema(const onnx::NodeProto& np, const std::string& label, int opset) {
  const int known = std::min(opset, onnx_library_opset());
  if (const auto* newer = onnx_schemas::newer_schema(np.op_type(), opset); newer && newer->since > known)
    return onnx_schemas::verify_newer_schema(*newer, np, label);
  const auto* schema = onnx::OpSchemaRegistry::Schema(np.op_type(), known, "");
  D5_CHECK(schema != nullptr, FormatError,
           "{}: ONNX has no {} at opset {} (the model's opset); it was added in a later opset", label, np.op_type(),
           opset);
  D5_CHECK(!schema->Deprecated(), Unimplemented, "{}: {} is deprecated at opset {}", label, np.op_type(), opset);
  try {
    schema->Verify(np);
  } catch (const std::exception& e) {
    D5_THROW(FormatError, "{}: not valid {}-{} (the form at opset {}): {}", label, np.op_type(),
             schema->SinceVersion(), opset, first_line(e.what()));
  }
}

// A dimension of a graph input: its value, the option naming it, or an error saying which option
// to pass.
int64_t input_dim(const onnx::TensorShapeProto::Dimension& d, size_t index, const std::string& input,
                  const ImportOptions& o) {
  if (d.has_dim_value()) {
    D5_CHECK(d.dim_value() >= 0, FormatError, "graph input '{}': dimension {} is {}", input, index, d.dim_value());
    return d.dim_value();
  }
  const std::string& param = d.has_dim_param() ? d.dim_param() : std::string();
  if (!param.empty()) {
    auto it = o.dims.find(param);
    if (it != o.dims.end()) {
      D5_CHECK_ARG(it->second >= 0, "ImportOptions::dims[\"{}\"] is {}; dimensions are non-negative", param,
                   it->second);
      return it->second;
    }
  }
  if (index == 0 && o.batch >= 0) return o.batch;
  if (!param.empty())
    D5_THROW(InvalidArgument,
             "graph input '{}' has the symbolic dimension '{}' (dimension {}); give its value with "
             "ImportOptions::dims[\"{}\"]{}",
             input, param, index, param, index == 0 ? " or ImportOptions::batch" : "");
  D5_THROW(InvalidArgument,
           "graph input '{}': dimension {} has no value and no name; give its value with {}", input, index,
           index == 0 ? "ImportOptions::batch or ImportOptions::input_shapes" : "ImportOptions::input_shapes");
}

TensorDesc input_desc(const onnx::ValueInfoProto& v, const ImportOptions& o) {
  const std::string& name = v.name();
  D5_CHECK(v.type().has_tensor_type(), Unimplemented,
           "graph input '{}' is not a tensor (sequence, map and optional values are not supported)", name);
  const auto& tt = v.type().tensor_type();
  D5_CHECK(tt.elem_type() != 0, FormatError, "graph input '{}' declares no element type", name);
  const DType dtype = dtype_from_onnx(tt.elem_type(), fmt::format("graph input '{}'", name));
  auto given = o.input_shapes.find(name);
  if (given != o.input_shapes.end()) return TensorDesc{dtype, given->second};
  D5_CHECK_ARG(tt.has_shape(), "graph input '{}' declares no shape; give it with ImportOptions::input_shapes[\"{}\"]",
               name, name);
  std::vector<int64_t> dims;
  for (int k = 0; k < tt.shape().dim_size(); ++k)
    dims.push_back(input_dim(tt.shape().dim(k), static_cast<size_t>(k), name, o));
  return TensorDesc{dtype, Shape(dims)};
}

// PyTorch writes one Identity per use of a deduplicated initializer; reading the initializer
// directly is the same computation (gradients of shared uses add up either way).
void remove_identities(Network& net) {
  const auto& outs = net.outputs();
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> identities;
  for (const auto& n : net.nodes())
    if (n.op_type == "Identity" && n.inputs.size() == 1 && !n.inputs[0].empty() && n.outputs.size() == 1 &&
        std::find(outs.begin(), outs.end(), n.outputs[0]) == outs.end())
      identities.push_back({n.name, {n.outputs[0], n.inputs[0]}});
  for (const auto& [name, edge] : identities) {
    net.remove_node(name);
    net.replace_uses(edge.first, edge.second);
  }
}

// Whether the producer pads `name` to a static bound (OpTraits::padded_outputs): a declared first
// dimension is then a real length, which may be anything up to the bound.
bool is_padded_output(const Node* producer, const std::string& name) {
  const auto traits = producer ? op_traits(producer->op_type) : nullptr;
  if (!traits) return false;
  for (int j : traits->padded_outputs)
    if (static_cast<size_t>(j) < producer->outputs.size() && producer->outputs[static_cast<size_t>(j)] == name)
      return true;
  return false;
}

// Declared graph outputs must agree with what inference derived; symbolic dimensions are not
// compared, nor the first dimension of a padded output beyond being within its bound.
void check_declared_outputs(const Network& net, const onnx::GraphProto& g, bool compare_shapes) {
  for (const auto& out : g.output()) {
    const std::string& name = out.name();
    D5_CHECK(out.type().value_case() == onnx::TypeProto::VALUE_NOT_SET || out.type().has_tensor_type(),
             Unimplemented, "graph output '{}' is not a tensor (sequence, map and optional values are not supported)",
             name);
    if (!out.type().has_tensor_type()) continue;
    const TensorDesc& d = net.desc(name);
    const Node* p = net.producer(name);
    const std::string by = p ? fmt::format("{} produces", node_label(*p)) : std::string("it is");
    const auto& tt = out.type().tensor_type();
    D5_CHECK(tt.elem_type() == 0 || tt.elem_type() == onnx_type_of(d.dtype), FormatError,
             "graph output '{}' is declared {}, but {} {}", name, onnx_type_name(tt.elem_type()), by,
             onnx_type_name(onnx_type_of(d.dtype)));
    if (!compare_shapes || !tt.has_shape()) continue;
    const bool padded = is_padded_output(p, name);
    bool same = tt.shape().dim_size() == static_cast<int>(d.shape.rank());
    for (int k = 0; same && k < tt.shape().dim_size(); ++k) {
      const auto& dim = tt.shape().dim(k);
      const int64_t inferred = d.shape[static_cast<size_t>(k)];
      same = !dim.has_dim_value() || dim.dim_value() == inferred || (padded && k == 0 && dim.dim_value() <= inferred);
    }
    if (same) continue;
    std::string declared = "[";
    for (int k = 0; k < tt.shape().dim_size(); ++k) {
      const auto& dim = tt.shape().dim(k);
      declared += (k ? ", " : "") + (dim.has_dim_value() ? std::to_string(dim.dim_value())
                                                           : dim.has_dim_param() ? dim.dim_param() : "?");
    }
    D5_THROW(FormatError, "graph output '{}' is declared with shape {}], but {} shape {}", name, declared, by,
             d.shape.to_string());
  }
}

Network build(const onnx::ModelProto& model, const ImportOptions& o) {
  const int64_t opset = default_opset(model);
  D5_CHECK(opset >= kMinImportOpset, Unimplemented,
           "the model imports opset {} of the default ONNX domain, older than opset {}, the oldest d5 imports; "
           "convert it with onnx.version_converter.convert_version(model, {})",
           opset, kMinImportOpset, kMinImportOpset);
  D5_CHECK(opset <= kMaxImportOpset, Unimplemented,
           "the model imports opset {} of the default ONNX domain, newer than opset {}, the newest d5 imports; "
           "export it for opset {} (torch.onnx.export(..., opset_version={}))",
           opset, kMaxImportOpset, kMaxImportOpset, kMaxImportOpset);
  const auto& g = model.graph();
  Network net(o.name.empty() ? (g.name().empty() ? std::string("onnx") : g.name()) : o.name, static_cast<int>(opset));
  ImportContext ctx{net, static_cast<int>(opset), o, {}};

  D5_CHECK(g.sparse_initializer_size() == 0, Unimplemented, "sparse initializers are not supported (the first is '{}')",
           g.sparse_initializer_size() ? g.sparse_initializer(0).values().name() : "");
  std::set<std::string> initializers;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const auto& t = g.initializer(i);
    D5_CHECK(!t.name().empty(), FormatError, "initializer #{} has no name", i);
    D5_CHECK(initializers.insert(t.name()).second, FormatError, "initializer '{}' is defined twice", t.name());
    net.feed_tensor(t.name(), tensor_from_proto(t, fmt::format("initializer '{}'", t.name()), o.base_dir));
  }
  for (const auto& in : g.input()) {
    if (initializers.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    D5_CHECK(!in.name().empty(), FormatError, "a graph input has no name");
    net.add_input(in.name(), input_desc(in, o));
  }

  std::set<std::string> names;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& np = g.node(i);
    // ONNX does not require node names, nor unique ones; the network does.
    std::string name = np.name().empty() ? fmt::format("{}_{}", np.op_type(), i) : np.name();
    for (int k = 1; names.count(name); ++k) name = fmt::format("{}_{}", np.name().empty() ? np.op_type() : np.name(), k);
    names.insert(name);
    const std::string label = fmt::format("node '{}' ({})", name, np.op_type());
    D5_CHECK(is_default_domain(np.domain()), Unimplemented,
             "{} is in domain '{}'; d5 imports only the default ONNX domain (ai.onnx)", label, np.domain());
    const NodeVisitor visitor = visitor_of(np.op_type());
    D5_CHECK(visitor != nullptr, Unimplemented,
             "{}: d5 cannot import op type '{}' (opset {}): it has no d5 operator; docs/onnx-import-export.md "
             "lists the supported ones",
             label, np.op_type(), opset);
    check_schema(np, label, static_cast<int>(opset));
    Node n;
    n.name = name;
    n.op_type = np.op_type();
    n.attrs = attributes_from_node(np, o.base_dir);
    n.attrs.context = label;
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    visitor(ctx, n);
    try {
      net.add_node(std::move(n));
    } catch (const InvalidArgument& e) {  // two producers of one tensor: the file is wrong, not the call
      throw FormatError(e.what());
    }
  }
  for (const auto& out : g.output()) {
    D5_CHECK(!out.name().empty(), FormatError, "a graph output has no name");
    net.add_output(out.name());
  }
  for (const auto& [tensor, why] : ctx.dropped_outputs) {
    const auto readers = net.consumers(tensor);
    const auto& outs = net.outputs();
    D5_CHECK(readers.empty() && std::find(outs.begin(), outs.end(), tensor) == outs.end(), Unimplemented,
             "'{}' is {}, but {} reads it", tensor, why,
             readers.empty() ? std::string("the graph output") : node_label(*readers[0]));
  }

  if (o.remove_identities) remove_identities(net);
  net.mark_parameters_by_use();  // runs inference: structural, shape and dtype errors name the node
  if (o.fold_constants) net.fold_constants();
  net.infer();
  check_declared_outputs(net, g, o.input_shapes.empty());
  return net;
}

}  // namespace

Network import_onnx(const onnx::ModelProto& model, const ImportOptions& options) {
  try {
    return build(model, options);
  } catch (const Error& e) {
    const std::string& graph = model.graph().name();
    rethrow_with_message(e, fmt::format("importing ONNX model{}: {}", graph.empty() ? "" : " '" + graph + "'",
                                        e.what()));
  }
}

Network import_onnx_file(const std::string& path, const ImportOptions& options) {
  const auto model = onnx_io::load_model(path);
  ImportOptions o = options;
  if (o.base_dir.empty()) o.base_dir = std::filesystem::absolute(path).parent_path().string();
  if (o.name.empty()) o.name = std::filesystem::path(path).stem().string();
  try {
    return build(model, o);
  } catch (const Error& e) {
    rethrow_with_message(e, fmt::format("importing '{}': {}", path, e.what()));
  }
}

int onnx_library_opset() {
  static const int opset = [] {
    const auto& released = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().LastReleaseVersionMap();
    auto it = released.find(onnx::ONNX_DOMAIN);
    return it == released.end() ? 0 : it->second;
  }();
  return opset;
}

std::vector<std::string> importable_op_types() {
  std::vector<std::string> out;
  for (const auto& type : described_op_types())
    if (visitor_of(type)) out.push_back(type);
  return out;
}

}  // namespace d5
