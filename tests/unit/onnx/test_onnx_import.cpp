// ONNX import: models written here with the protobuf API, imported into d5::Network.
#include <gtest/gtest.h>

#include <fstream>

#include "../../support/expect_error.h"
#include "../../support/onnx_cases.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/op/op_registry.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace {

class OnnxImport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

onnx::AttributeProto ints_attr(const std::string& name, std::vector<int64_t> v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

onnx::AttributeProto tensor_attr(const std::string& name, const Tensor& t) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::TENSOR);
  *a.mutable_t() = onnx_io::tensor_to_proto(t);
  return a;
}

// y = Relu(x @ W + b), x[2, 3].
CaseDef mlp_case() {
  CaseDef c;
  c.nodes = {{"MatMul", {"x", "W"}, {"h"}}, {"Add", {"h", "b"}, {"hb"}}, {"Relu", {"hb"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2, 3}, {1, -2, 3, 0.5f, 1, -1})}};
  c.initializers = {{"W", Tensor::from_values<float>(Shape{3, 2}, {1, 0, 0, 1, 1, 1})},
                    {"b", Tensor::from_values<float>(Shape{2}, {0.5f, -10})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{2, 2}, {4.5f, 0, 0, 0})}};
  return c;
}

std::map<std::string, Tensor> run(const Network& net, const std::map<std::string, Tensor>& feeds) {
  return run_network_nodes(net, feeds, "reference");
}

}  // namespace

TEST_F(OnnxImport, BuildsTheNetworkAndMarksParameters) {
  const CaseDef c = mlp_case();
  Network net = import_onnx(make_model(c));
  EXPECT_EQ(net.opset(), 13);
  EXPECT_EQ(net.inputs(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(net.outputs(), (std::vector<std::string>{"y"}));
  ASSERT_EQ(net.nodes().size(), 3u);
  EXPECT_EQ(net.nodes()[0].op_type, "MatMul");
  EXPECT_EQ(net.nodes()[0].name, "MatMul_0");  // unnamed ONNX nodes get op type and index
  EXPECT_EQ(net.get_params(), (std::vector<std::string>{"W", "b"}));
  EXPECT_EQ(net.desc("y").shape, (Shape{2, 2}));
  const auto out = run(net, {{"x", c.inputs[0].second}});
  // Row 0: [1 + 3, -2 + 3] + b = [4.5, -9] -> relu [4.5, 0]; row 1: [-0.5, 0] + b -> [0, 0].
  EXPECT_TRUE(allclose(out.at("y"), c.outputs[0].second, 0, 0));
}

TEST_F(OnnxImport, UnknownOpNamesOpNodeAndOpset) {
  CaseDef c = relu_case();
  c.nodes[0].op_type = "Hardmax";
  auto m = make_model(c);
  m.mutable_graph()->mutable_node(0)->set_name("hardmax1");
  expect_error<Unimplemented>([&] { import_onnx(m); }, {"node 'hardmax1' (Hardmax)", "'Hardmax'", "opset 13"});
}

TEST_F(OnnxImport, NonDefaultDomainIsRefusedWithTheDomain) {
  CaseDef c = relu_case();
  c.nodes[0].domain = "com.microsoft";
  expect_error<Unimplemented>([&] { import_onnx(make_model(c)); },
                              {"node 'Relu_0' (Relu) is in domain 'com.microsoft'", "default ONNX domain"});
}

TEST_F(OnnxImport, OpsetsOutsideSevenToTwentyTwoAreRefused) {
  CaseDef c = relu_case();
  c.opset = 6;
  expect_error<Unimplemented>([&] { import_onnx(make_model(c)); }, {"opset 6", "older than opset 7"});
  c.opset = 23;
  expect_error<Unimplemented>([&] { import_onnx(make_model(c)); }, {"opset 23", "newer than opset 22"});
  for (int opset : {7, 17, 18, 22}) {
    c.opset = opset;
    EXPECT_EQ(import_onnx(make_model(c)).opset(), opset);
  }
}

TEST_F(OnnxImport, MalformedFileIsAFormatErrorNamingIt) {
  TempDir dir("d5-import");
  const auto path = (dir.path / "broken.onnx").string();
  std::ofstream(path) << "\x0a\xff\xff\xff garbage that is no protobuf";
  expect_error<FormatError>([&] { import_onnx_file(path); }, {"broken.onnx"});
  expect_error<IoError>([&] { import_onnx_file((dir.path / "missing.onnx").string()); }, {"missing.onnx"});
}

TEST_F(OnnxImport, MissingInitializerNamesTheNode) {
  CaseDef c = mlp_case();
  c.initializers.pop_back();  // b
  expect_error<FormatError>([&] { import_onnx(make_model(c)); }, {"node 'Add_1' (Add) reads 'b'"});
}

TEST_F(OnnxImport, CycleIsAFormatError) {
  CaseDef c = relu_case();
  c.nodes = {{"Add", {"x", "t2"}, {"t1"}}, {"Relu", {"t1"}, {"t2"}}, {"Neg", {"t2"}, {"y"}}};
  expect_error<FormatError>([&] { import_onnx(make_model(c)); }, {"cycle"});
}

TEST_F(OnnxImport, ShapeMismatchNamesTheNode) {
  CaseDef c = mlp_case();
  c.initializers[0].second = Tensor(DType::f32, Shape{4, 2});
  expect_error<InvalidArgument>([&] { import_onnx(make_model(c)); }, {"'MatMul_0'"});
}

TEST_F(OnnxImport, DeclaredOutputShapeMustMatchInference) {
  CaseDef c = mlp_case();
  c.outputs[0].second = Tensor(DType::f32, Shape{2, 3});
  expect_error<FormatError>([&] { import_onnx(make_model(c)); },
                            {"graph output 'y' is declared with shape [2, 3]", "node 'Relu_2' (Relu) produces"});
}

TEST_F(OnnxImport, SchemaViolationsAreFormatErrorsNamingTheNode) {
  CaseDef c = relu_case();
  c.nodes[0].inputs = {"x", "x"};  // Relu takes one input
  expect_error<FormatError>([&] { import_onnx(make_model(c)); }, {"node 'Relu_0' (Relu)", "Relu-"});
  // Unsqueeze's axes became an input at opset 13; the attribute is not valid there.
  CaseDef u;
  u.nodes = {{"Unsqueeze", {"x"}, {"y"}, {ints_attr("axes", {0})}}};
  u.inputs = {{"x", Tensor(DType::f32, Shape{3})}};
  u.outputs = {{"y", Tensor(DType::f32, Shape{1, 3})}};
  expect_error<FormatError>([&] { import_onnx(make_model(u)); },
                            {"node 'Unsqueeze_0' (Unsqueeze)", "input size 1 not in range [min=2, max=2]"});
  u.opset = 11;
  EXPECT_EQ(import_onnx(make_model(u)).desc("y").shape, (Shape{1, 3}));
}

TEST_F(OnnxImport, TwoProducersOfATensorAreAFormatError) {
  CaseDef c = relu_case();
  c.nodes = {{"Relu", {"x"}, {"y"}}, {"Neg", {"x"}, {"y"}}};
  expect_error<FormatError>([&] { import_onnx(make_model(c)); }, {"'y'", "already produces"});
}

TEST_F(OnnxImport, SymbolicDimensionsNeedValues) {
  CaseDef c = relu_case();
  auto m = make_model(c);
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_param("N");
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_param("N");
  expect_error<InvalidArgument>([&] { import_onnx(m); },
                                {"graph input 'x' has the symbolic dimension 'N'", "ImportOptions::dims[\"N\"]",
                                 "ImportOptions::batch"});
  ImportOptions o;
  o.batch = 7;
  EXPECT_EQ(import_onnx(m, o).desc("y").shape, (Shape{7}));
  o.dims["N"] = 5;  // a named value wins over batch
  EXPECT_EQ(import_onnx(m, o).desc("y").shape, (Shape{5}));
  ImportOptions shapes;
  shapes.input_shapes["x"] = Shape{2, 2};
  EXPECT_EQ(import_onnx(m, shapes).desc("y").shape, (Shape{2, 2}));
}

TEST_F(OnnxImport, ExternalDataIsReadRelativeToTheModel) {
  TempDir dir("d5-import");
  CaseDef c = mlp_case();
  auto m = make_model(c);
  // W's bytes go to weights/w.bin after 16 bytes of something else.
  const Tensor w = c.initializers[0].second;
  std::filesystem::create_directories(dir.path / "weights");
  {
    std::ofstream bin(dir.path / "weights" / "w.bin", std::ios::binary);
    bin << std::string(16, 'z');
    bin.write(static_cast<const char*>(w.data()), static_cast<std::streamsize>(w.bytes()));
  }
  auto set_external = [&](onnx::ModelProto& model, const std::string& location, int64_t offset, int64_t length) {
    auto* t = model.mutable_graph()->mutable_initializer(0);
    t->clear_raw_data();
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location},
                               {"offset", std::to_string(offset)},
                               {"length", std::to_string(length)}}) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  };
  set_external(m, "weights/w.bin", 16, static_cast<int64_t>(w.bytes()));
  const auto path = (dir.path / "model.onnx").string();
  write_model(path, m);
  Network net = import_onnx_file(path);
  EXPECT_TRUE(allclose(net.fetch_tensor("W"), w, 0, 0));
  EXPECT_TRUE(allclose(run(net, {{"x", c.inputs[0].second}}).at("y"), c.outputs[0].second, 0, 0));
  // Without a directory the in-memory model cannot be resolved.
  expect_error<Unimplemented>([&] { import_onnx(m); }, {"initializer 'W'", "needs the model's directory"});

  set_external(m, "../w.bin", 0, 4);
  write_model(path, m);
  expect_error<FormatError>([&] { import_onnx_file(path); }, {"initializer 'W'", "'../w.bin'", "relative path"});
  set_external(m, "/etc/passwd", 0, 4);  // an absolute path reads no file outside the model's directory
  write_model(path, m);
  expect_error<FormatError>([&] { import_onnx_file(path); }, {"initializer 'W'", "'/etc/passwd'", "relative path"});
  set_external(m, "weights/w.bin", 20, static_cast<int64_t>(w.bytes()));  // runs 4 bytes past the end
  write_model(path, m);
  expect_error<FormatError>([&] { import_onnx_file(path); }, {"initializer 'W'", "beyond the end"});
  set_external(m, "weights/w.bin", 16, 8);  // too few bytes for [3, 2] floats
  write_model(path, m);
  expect_error<FormatError>([&] { import_onnx_file(path); }, {"external data holds 8 bytes"});
  set_external(m, "weights/nothing.bin", 0, 24);
  write_model(path, m);
  expect_error<IoError>([&] { import_onnx_file(path); }, {"nothing.bin"});
}

// The attribute forms of opsets before 13 and the input forms after give the same network output.
TEST_F(OnnxImport, AttributeAndInputFormsOfOldAndNewOpsetsAgree) {
  const Tensor x = Tensor::from_values<float>(Shape{2, 3}, {-3, -1, 0, 1, 2, 5});
  auto make = [&](int64_t opset) {
    CaseDef c;
    c.opset = opset;
    c.inputs = {{"x", x}};
    c.outputs = {{"y", Tensor(DType::f32, Shape{2})}};
    if (opset < 11) {
      onnx::AttributeProto lo = float_attr("min", -2), hi = float_attr("max", 4);
      c.nodes = {{"Clip", {"x"}, {"c"}, {lo, hi}},
                 {"Unsqueeze", {"c"}, {"u"}, {ints_attr("axes", {0})}},
                 {"ReduceSum", {"u"}, {"r"}, {ints_attr("axes", {2}), int_attr("keepdims", 0)}},
                 {"Squeeze", {"r"}, {"y"}, {ints_attr("axes", {0})}}};
    } else {
      c.initializers = {{"lo", Tensor::from_values<float>(Shape{}, {-2})},
                        {"hi", Tensor::from_values<float>(Shape{}, {4})},
                        {"axes0", Tensor::from_values<int64_t>(Shape{1}, {0})},
                        {"axes3", Tensor::from_values<int64_t>(Shape{1}, {-1})}};
      c.nodes = {{"Clip", {"x", "lo", "hi"}, {"c"}},
                 {"Unsqueeze", {"c", "axes0"}, {"u"}},
                 {"ReduceSum", {"u", "axes3"}, {"r"}, {int_attr("keepdims", 0)}},
                 {"Squeeze", {"r", "axes0"}, {"y"}}};
    }
    return make_model(c);
  };
  // clip -> [-2, -1, 0 | 1, 2, 4], row sums [-3, 7]
  const Tensor expected = Tensor::from_values<float>(Shape{2}, {-3, 7});
  for (int64_t opset : {9, 10}) {
    Network net = import_onnx(make(opset));
    EXPECT_EQ(net.opset(), opset);
    EXPECT_TRUE(allclose(run(net, {{"x", x}}).at("y"), expected, 0, 0)) << "opset " << opset;
  }
  for (int64_t opset : {13, 17}) {
    Network net = import_onnx(make(opset));
    EXPECT_TRUE(allclose(run(net, {{"x", x}}).at("y"), expected, 0, 0)) << "opset " << opset;
  }
}

TEST_F(OnnxImport, BatchNormalizationTrainingOutputsBeforeOpset14BecomeTrainingMode) {
  CaseDef c;
  c.opset = 9;
  c.nodes = {{"BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv", "saved_mean", "saved_var"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2, 1}, {1, 3})}};
  for (const char* p : {"s", "v"}) c.initializers.push_back({p, Tensor::from_values<float>(Shape{1}, {1})});
  for (const char* p : {"b", "m"}) c.initializers.push_back({p, Tensor::from_values<float>(Shape{1}, {0})});
  c.outputs = {{"y", Tensor(DType::f32, Shape{2, 1})}};
  auto m = make_model(c);
  ImportOptions keep;
  keep.fold_constants = false;
  Network net = import_onnx(m, keep);
  EXPECT_EQ(net.nodes()[0].attrs.get_int("training_mode", 0), 1);
  EXPECT_EQ(net.nodes()[0].outputs, (std::vector<std::string>{"y", "rm", "rv"}));
  // Batch statistics: mean 2, biased variance 1, so y = (x - 2) / sqrt(1 + 1e-5).
  const auto y = run(net, {{"x", c.inputs[0].second}}).at("y");
  EXPECT_NEAR(y.get(0), -1, 1e-4);
  EXPECT_NEAR(y.get(1), 1, 1e-4);
  // A node reading the saved statistics cannot be imported.
  auto reads_saved = m;
  auto* neg = reads_saved.mutable_graph()->add_node();
  neg->set_op_type("Neg");
  neg->add_input("saved_var");
  neg->add_output("z");
  expect_error<Unimplemented>([&] { import_onnx(reads_saved); },
                              {"'saved_var' is the saved inverse standard deviation", "node 'Neg_1' (Neg) reads it"});
  // Only Y asked for: inference mode, the statistics come from the initializers.
  m.mutable_graph()->mutable_node(0)->mutable_output()->DeleteSubrange(1, 4);
  Network inference = import_onnx(m);
  EXPECT_FALSE(inference.nodes()[0].attrs.has("training_mode"));
  EXPECT_NEAR(run(inference, {{"x", c.inputs[0].second}}).at("y").get(1), 3, 1e-4);
}

// What PyTorch exports for x.view(x.size(0), -1) with Constant nodes.
TEST_F(OnnxImport, FoldsShapeChainsUnlessAskedToKeepThem) {
  CaseDef c;
  c.inputs = {{"x", Tensor(DType::f32, Shape{3, 2, 5})}};
  c.outputs = {{"y", Tensor(DType::f32, Shape{3, 10})}};
  c.nodes = {{"Shape", {"x"}, {"s"}},
             {"Constant", {}, {"zero"}, {tensor_attr("value", Tensor::from_values<int64_t>(Shape{}, {0}))}},
             {"Gather", {"s", "zero"}, {"n"}, {int_attr("axis", 0)}},
             {"Constant", {}, {"axes"}, {tensor_attr("value", Tensor::from_values<int64_t>(Shape{1}, {0}))}},
             {"Unsqueeze", {"n", "axes"}, {"n1"}},
             {"Constant", {}, {"m1"}, {tensor_attr("value", Tensor::from_values<int64_t>(Shape{1}, {-1}))}},
             {"Concat", {"n1", "m1"}, {"target"}, {int_attr("axis", 0)}},
             {"Reshape", {"x", "target"}, {"y"}}};
  const auto m = make_model(c);
  Network folded = import_onnx(m);
  ASSERT_EQ(folded.nodes().size(), 1u);
  EXPECT_EQ(folded.nodes()[0].op_type, "Reshape");
  EXPECT_EQ(folded.fetch_tensor("target").get(0), 3);
  ImportOptions keep;
  keep.fold_constants = false;
  Network kept = import_onnx(m, keep);
  EXPECT_EQ(kept.nodes().size(), 8u);
  EXPECT_EQ(kept.desc("y").shape, (Shape{3, 10}));
}

TEST_F(OnnxImport, IdentitiesOfInitializersAreRemovedUnlessTheyAreOutputs) {
  CaseDef c = mlp_case();
  c.nodes.insert(c.nodes.begin(), NodeDef{"Identity", {"W"}, {"W_copy"}});
  c.nodes[1].inputs[1] = "W_copy";
  c.nodes.push_back(NodeDef{"Identity", {"y"}, {"y_out"}});
  c.outputs[0].first = "y_out";
  Network net = import_onnx(make_model(c));
  ASSERT_EQ(net.nodes().size(), 4u);  // MatMul, Add, Relu, and the Identity producing the output
  EXPECT_EQ(net.nodes()[0].inputs[1], "W");
  EXPECT_EQ(net.nodes().back().op_type, "Identity");
  ImportOptions keep;
  keep.remove_identities = false;
  EXPECT_EQ(import_onnx(make_model(c), keep).nodes().size(), 5u);
}

TEST_F(OnnxImport, EveryImportableOpHasAReferenceOperator) {
  for (const auto& op : importable_op_types())
    EXPECT_FALSE(OpRegistry::global().implementations(op, "reference").empty()) << op;
}

}  // namespace d5::test
