// d5::Network -> ONNX ModelProto, the inverse of onnx_import.cpp.
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <type_traits>

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/onnx/onnx_io.h"

namespace d5 {

namespace {

using onnx::AttributeProto;
using namespace onnx_io;

std::string node_label(const Node& n) { return fmt::format("node '{}' ({})", n.name, n.op_type); }

AttributeProto to_attribute(const std::string& name, const AttrValue& value) {
  AttributeProto a;
  a.set_name(name);
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t>) {
          a.set_type(AttributeProto::INT);
          a.set_i(v);
        } else if constexpr (std::is_same_v<V, double>) {
          a.set_type(AttributeProto::FLOAT);
          a.set_f(static_cast<float>(v));
        } else if constexpr (std::is_same_v<V, std::string>) {
          a.set_type(AttributeProto::STRING);
          a.set_s(v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          a.set_type(AttributeProto::INTS);
          for (int64_t x : v) a.add_ints(x);
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          a.set_type(AttributeProto::FLOATS);
          for (double x : v) a.add_floats(static_cast<float>(x));
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          a.set_type(AttributeProto::STRINGS);
          for (const auto& x : v) a.add_strings(x);
        } else {
          static_assert(std::is_same_v<V, Tensor>);
          a.set_type(AttributeProto::TENSOR);
          *a.mutable_t() = tensor_to_proto(v);
        }
      },
      value);
  return a;
}

onnx::ValueInfoProto value_info(const std::string& name, const TensorDesc& d) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type_of(d.dtype));
  auto* shape = tt->mutable_shape();
  for (int64_t x : d.shape.dims()) shape->add_dim()->set_dim_value(x);
  return v;
}

// The node in ONNX's form at the opset (undoing what the importer's visitors rewrote).
Node onnx_form(const Node& n, int opset) {
  Node out = n;
  // Before opset 14, training mode is said by listing all 5 outputs (the saved statistics unnamed).
  if (n.op_type == "BatchNormalization" && n.domain.empty() && opset < 14) {
    if (n.attrs.get_int("training_mode", 0) != 0) out.outputs.resize(5);
    out.attrs.erase("training_mode");
  }
  return out;
}

void check_has_schema(const Node& n, int opset) {
  if (!n.domain.empty()) return;  // another domain's operators are the user's to describe
  D5_CHECK_ARG(onnx::OpSchemaRegistry::Schema(n.op_type, opset, "") != nullptr,
               "{}: ONNX has no operator {} at opset {}, the network's opset; it cannot be exported to the "
               "default domain (give the node a domain of its own, or raise the opset where ONNX defines it)",
               node_label(n), n.op_type, opset);
}

// ONNX does not say which initializers are trainable; importers (d5's included) take those that
// feed a differentiable input. Constants there (folded results such as an LSTM's zero initial
// state, a constant divisor) are written as Constant nodes, which says what they are and lets an
// import mark exactly the same parameters.
std::set<std::string> constants_read_as_differentiable(const Network& net) {
  std::set<std::string> out;
  for (const auto& n : net.nodes()) {
    const auto& mask = net.differentiable_inputs(n.name);
    for (size_t i = 0; i < n.inputs.size() && i < mask.size(); ++i) {
      const std::string& t = n.inputs[i];
      if (mask[i] && net.is_initializer(t) && !net.is_param(t) && is_floating(net.desc(t).dtype)) out.insert(t);
    }
  }
  return out;
}

onnx::ModelProto build_model(const Network& net, const ExportOptions& o) {
  net.infer();
  const int opset = net.opset();
  D5_CHECK_ARG(opset <= onnx_library_opset(),
               "network '{}' is of opset {}, newer than opset {}, the newest the ONNX library this d5 was built with "
               "knows; its checker cannot validate the model (build d5 against ONNX 1.17 or newer for opsets up to {})",
               net.name(), opset, onnx_library_opset(), kMaxImportOpset);
  onnx::ModelProto m;
  m.set_ir_version(ir_version_for_opset(opset));
  m.set_producer_name(o.producer_name);
  m.set_producer_version(build_info().version);
  if (!o.doc_string.empty()) m.set_doc_string(o.doc_string);
  auto* def = m.add_opset_import();
  def->set_domain("");
  def->set_version(opset);
  std::set<std::string> domains;
  for (const auto& n : net.nodes())
    if (!n.domain.empty() && !is_default_domain(n.domain)) domains.insert(n.domain);
  for (const auto& d : domains) {
    auto* imp = m.add_opset_import();
    imp->set_domain(d);
    imp->set_version(1);
  }

  auto* g = m.mutable_graph();
  g->set_name(net.name());
  for (const auto& in : net.inputs()) *g->add_input() = value_info(in, net.desc(in));
  const auto constants = constants_read_as_differentiable(net);
  for (const auto& name : net.initializers()) {
    if (constants.count(name)) {
      auto* np = g->add_node();
      np->set_name(net.unique_name(name + "_constant"));
      np->set_op_type("Constant");
      np->add_output(name);
      *np->add_attribute() = to_attribute("value", net.fetch_tensor(name));
      continue;
    }
    *g->add_initializer() = tensor_to_proto(net.fetch_tensor(name), name);
    // IR 3 requires every initializer to be listed as a graph input too.
    if (m.ir_version() < 4) *g->add_input() = value_info(name, net.desc(name));
  }
  for (const Node* n : net.topological_order()) {
    check_has_schema(*n, opset);
    const Node form = onnx_form(*n, opset);
    auto* np = g->add_node();
    np->set_name(form.name);
    np->set_op_type(form.op_type);
    if (!is_default_domain(form.domain)) np->set_domain(form.domain);
    for (const auto& i : form.inputs) np->add_input(i);
    for (const auto& out : form.outputs) np->add_output(out);
    for (const auto& [name, value] : form.attrs.all()) *np->add_attribute() = to_attribute(name, value);
  }
  for (const auto& out : net.outputs()) *g->add_output() = value_info(out, net.desc(out));
  return m;
}

// What onnx.checker says about the model, as an error naming the network.
void check_model(const onnx::ModelProto& m, const Network& net) {
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    D5_THROW(InvalidArgument, "network '{}': the exported model is not valid ONNX: {}", net.name(), e.what());
  }
}

}  // namespace

int64_t ir_version_for_opset(int opset) {
  if (opset <= 8) return 3;
  if (opset == 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  return 10;
}

onnx::ModelProto export_onnx(const Network& net, const ExportOptions& options) {
  auto m = build_model(net, options);
  check_model(m, net);
  return m;
}

void export_onnx_file(const Network& net, const std::string& path, const ExportOptions& options) {
  auto m = build_model(net, options);
  check_model(m, net);
  const std::filesystem::path model_path(path);
  if (options.external_data_threshold >= 0) {
    const std::string file =
        options.external_data_file.empty() ? model_path.filename().string() + ".data" : options.external_data_file;
    const auto data_path = model_path.parent_path() / file;
    std::ofstream data(data_path, std::ios::binary | std::ios::trunc);
    D5_CHECK(data.good(), IoError, "cannot create '{}' (the external data of '{}')", data_path.string(), path);
    int64_t offset = 0;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      const std::string& raw = t.raw_data();
      if (static_cast<int64_t>(raw.size()) < options.external_data_threshold) continue;
      data.write(raw.data(), static_cast<std::streamsize>(raw.size()));
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", file},
                                       {"offset", std::to_string(offset)},
                                       {"length", std::to_string(raw.size())}}) {
        auto* e = t.add_external_data();
        e->set_key(key);
        e->set_value(value);
      }
      offset += static_cast<int64_t>(raw.size());
      t.clear_raw_data();
    }
    D5_CHECK(data.flush(), IoError, "error writing '{}'", data_path.string());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  D5_CHECK(out.good(), IoError, "cannot create '{}'", path);
  D5_CHECK(m.SerializeToOstream(&out) && out.flush(), IoError, "error writing '{}'", path);
}

}  // namespace d5
