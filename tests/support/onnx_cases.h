#pragma once
// Writes small ONNX test cases with the protobuf API, laid out like onnx.backend.test's:
// DIR/model.onnx and DIR/test_data_set_0/{input_i,output_i}.pb.
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "deep500/onnx/onnx_io.h"
#include "temp_dir.h"

namespace d5::test {

namespace fs = std::filesystem;

struct NodeDef {
  NodeDef(std::string op, std::vector<std::string> in, std::vector<std::string> out,
          std::vector<onnx::AttributeProto> a = {})
      : op_type(std::move(op)), inputs(std::move(in)), outputs(std::move(out)), attrs(std::move(a)) {}
  std::string op_type;
  std::vector<std::string> inputs, outputs;
  std::vector<onnx::AttributeProto> attrs;
  std::string domain;
};

struct CaseDef {
  std::vector<NodeDef> nodes;
  std::vector<std::pair<std::string, Tensor>> inputs;        // graph inputs and their values
  std::vector<std::pair<std::string, Tensor>> outputs;       // graph outputs and expected values
  std::vector<std::pair<std::string, Tensor>> initializers;
  int64_t opset = 13;
};

inline onnx::AttributeProto float_attr(const std::string& name, float v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

inline onnx::AttributeProto int_attr(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

inline onnx::ValueInfoProto value_info(const std::string& name, const Tensor& t) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_io::onnx_type_of(t.dtype()));
  for (int64_t d : t.shape().dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

inline onnx::ModelProto make_model(const CaseDef& c) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(c.opset);
  auto* g = m.mutable_graph();
  g->set_name("case");
  for (const auto& n : c.nodes) {
    auto* node = g->add_node();
    node->set_op_type(n.op_type);
    node->set_domain(n.domain);
    for (const auto& i : n.inputs) node->add_input(i);
    for (const auto& o : n.outputs) node->add_output(o);
    for (const auto& a : n.attrs) *node->add_attribute() = a;
  }
  for (const auto& [name, t] : c.inputs) *g->add_input() = value_info(name, t);
  for (const auto& [name, t] : c.outputs) *g->add_output() = value_info(name, t);
  for (const auto& [name, t] : c.initializers) *g->add_initializer() = onnx_io::tensor_to_proto(t, name);
  return m;
}

inline void write_model(const fs::path& path, const onnx::ModelProto& m) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  m.SerializeToOstream(&out);
}

// The model as make_model(c) builds it, or as `model` when given (to write a tweaked one).
inline void write_case(const fs::path& dir, const CaseDef& c, const onnx::ModelProto* model = nullptr) {
  fs::create_directories(dir / "test_data_set_0");
  write_model(dir / "model.onnx", model ? *model : make_model(c));
  for (size_t i = 0; i < c.inputs.size(); ++i)
    onnx_io::write_tensor_file((dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string(),
                               c.inputs[i].second, c.inputs[i].first);
  for (size_t i = 0; i < c.outputs.size(); ++i)
    onnx_io::write_tensor_file((dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")).string(),
                               c.outputs[i].second, c.outputs[i].first);
}

// y = Relu(x) on [-1, 2, -3, 4]; `expected` replaces the right answer [0, 2, 0, 4].
inline CaseDef relu_case(std::vector<float> expected = {0, 2, 0, 4}) {
  CaseDef c;
  c.nodes = {{"Relu", {"x"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{4}, {-1, 2, -3, 4})}};
  Tensor y(DType::f32, Shape{4});
  for (size_t i = 0; i < 4; ++i) y.set(static_cast<int64_t>(i), expected[i]);
  c.outputs = {{"y", y}};
  return c;
}

// relu_case() whose node carries a GRAPH attribute: a registered op d5 cannot run (UNIMPLEMENTED).
inline CaseDef relu_case_with_graph_attribute() {
  CaseDef c = relu_case();
  onnx::AttributeProto g;
  g.set_name("body");
  g.set_type(onnx::AttributeProto::GRAPH);
  c.nodes[0].attrs = {g};
  return c;
}

}  // namespace d5::test
