// ONNX export: networks to ModelProtos that import back to the same graph and outputs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../../support/network_compare.h"
#include "../../support/onnx_cases.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace {

class OnnxExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

// x[2, 3] -> Gemm(W^T, b) -> LeakyRelu(alpha 0.25) -> Unsqueeze(axes) -> y[1, 2, 4]
Network gemm_network(int opset) {
  Network net("gemm", opset);
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 3}});
  net.feed_tensor("W", Tensor::from_values<float>(Shape{4, 3}, {1, 2, 3, -1, 0, 1, 0.5f, 0.25f, 0, 2, -2, 1}));
  net.feed_tensor("b", Tensor::from_values<float>(Shape{4}, {0.1f, -0.2f, 0.3f, 0}));
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}, {"alpha", 1.5}}, {"x", "W", "b"}, {"h"}});
  net.add_node({"act", "LeakyRelu", "", Attributes{{"alpha", 0.25}}, {"h"}, {"a"}});
  if (opset >= 13) {
    net.feed_tensor("axes", Tensor::from_values<int64_t>(Shape{1}, {0}));
    net.add_node({"unsq", "Unsqueeze", "", {}, {"a", "axes"}, {"y"}});
  } else {
    net.add_node({"unsq", "Unsqueeze", "", Attributes{{"axes", std::vector<int64_t>{0}}}, {"a"}, {"y"}});
  }
  net.add_output("y");
  net.mark_parameters_by_use();
  return net;
}

const Tensor kX = Tensor::from_values<float>(Shape{2, 3}, {1, -1, 2, 0.5f, 3, -2});

Network round_trip(const Network& net) { return import_onnx(export_onnx(net)); }

}  // namespace

TEST_F(OnnxExport, RoundTripGivesTheSameGraphAndOutputs) {
  for (int opset : {8, 11, 13, 17, 18, 20, 22}) {
    if (opset > onnx_library_opset()) continue;  // refused below
    SCOPED_TRACE(opset);
    const Network net = gemm_network(opset);
    const auto m = export_onnx(net);
    EXPECT_EQ(m.ir_version(), ir_version_for_opset(opset));
    EXPECT_EQ(m.opset_import(0).version(), opset);
    EXPECT_EQ(m.producer_name(), "deep500");
    const Network back = import_onnx(m);
    expect_same_graph(net, back);
    const auto y0 = run_network_nodes(net, {{"x", kX}}, "reference").at("y");
    const auto y1 = run_network_nodes(back, {{"x", kX}}, "reference").at("y");
    EXPECT_EQ(y1.shape(), (Shape{1, 2, 4}));
    EXPECT_TRUE(allclose(y1, y0, 0, 0));
  }
}

TEST_F(OnnxExport, IrVersionFollowsTheOpset) {
  EXPECT_EQ(ir_version_for_opset(7), 3);
  EXPECT_EQ(ir_version_for_opset(9), 4);
  EXPECT_EQ(ir_version_for_opset(10), 5);
  EXPECT_EQ(ir_version_for_opset(11), 6);
  EXPECT_EQ(ir_version_for_opset(14), 7);
  EXPECT_EQ(ir_version_for_opset(17), 8);
  EXPECT_EQ(ir_version_for_opset(18), 8);
  EXPECT_EQ(ir_version_for_opset(19), 9);
  EXPECT_EQ(ir_version_for_opset(20), 9);
  EXPECT_EQ(ir_version_for_opset(21), 10);
  EXPECT_EQ(ir_version_for_opset(22), 10);
  // IR 3 lists initializers among the graph inputs; the importer reads them back as initializers.
  const auto m = export_onnx(gemm_network(8));
  EXPECT_EQ(m.graph().input_size(), 3);  // x, W, b
  EXPECT_EQ(import_onnx(m).inputs(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(export_onnx(gemm_network(9)).graph().input_size(), 1);
}

TEST_F(OnnxExport, ExportsCurrentParameterValues) {
  Network net = gemm_network(17);
  net.feed_tensor("b", Tensor::from_values<float>(Shape{4}, {9, 8, 7, 6}));
  EXPECT_EQ(round_trip(net).fetch_tensor("b").get(2), 7);
}

TEST_F(OnnxExport, BatchNormalizationTrainingModeIsSpelledPerOpset) {
  for (int opset : {9, 15}) {
    SCOPED_TRACE(opset);
    Network net("bn", opset);
    net.add_input("x", TensorDesc{DType::f32, Shape{4, 2}});
    for (const char* p : {"s", "b", "m", "v"}) net.feed_tensor(p, Tensor::from_values<float>(Shape{2}, {1, 0.5f}));
    net.add_node({"bn", "BatchNormalization", "", Attributes{{"training_mode", int64_t{1}}},
                  {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"}});
    net.add_output("y");
    net.add_output("rm");
    net.mark_parameters_by_use();
    const auto m = export_onnx(net);
    const auto& node = m.graph().node(0);
    EXPECT_EQ(node.output_size(), opset < 14 ? 5 : 3);  // before 14 the output count says it
    EXPECT_EQ(node.attribute_size(), opset < 14 ? 0 : 1);
    const Network back = import_onnx(m);
    expect_same_graph(net, back);
  }
}

TEST_F(OnnxExport, OpsWithoutAnOnnxSchemaAtTheOpsetAreRefused) {
  Network net("gelu", 17);
  net.add_input("x", TensorDesc{DType::f32, Shape{3}});
  net.add_node({"g", "Gelu", "", {}, {"x"}, {"y"}});  // ONNX defines Gelu from opset 20
  net.add_output("y");
  try {
    export_onnx(net);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node 'g' (Gelu): ONNX has no operator Gelu at opset 17"),
              std::string::npos)
        << e.what();
  }
}

// The checker of an ONNX library that does not know the opset cannot vouch for the model.
TEST_F(OnnxExport, OpsetsNewerThanTheOnnxLibraryKnowsAreRefused) {
  const int newer = onnx_library_opset() + 1;
  try {
    export_onnx(gemm_network(newer));
    FAIL() << "opset " << newer << " was exported";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("is of opset {}, newer than opset {}", newer, newer - 1)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(OnnxExport, ExternalDataFileRoundTrips) {
  TempDir dir("d5-export");
  const Network net = gemm_network(17);
  const auto path = (dir.path / "gemm.onnx").string();
  ExportOptions o;
  o.external_data_threshold = 40;  // W (48 bytes) goes out, b (16) and axes (8) stay inside
  export_onnx_file(net, path, o);
  ASSERT_TRUE(std::filesystem::exists(dir.path / "gemm.onnx.data"));
  EXPECT_EQ(std::filesystem::file_size(dir.path / "gemm.onnx.data"), 48u);
  const auto m = onnx_io::load_model(path);
  int external = 0;
  for (const auto& t : m.graph().initializer()) external += t.data_location() == onnx::TensorProto::EXTERNAL;
  EXPECT_EQ(external, 1);
  expect_same_graph(net, import_onnx_file(path));
}

TEST_F(OnnxExport, ImportedModelsExportBackUnchanged) {
  // A model as another tool writes it: unnamed nodes, an Identity, attribute defaults left out.
  CaseDef c;
  c.nodes = {{"Identity", {"x"}, {"xi"}}, {"Softmax", {"xi"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2, 2}, {0, 1, 2, 3})}};
  c.outputs = {{"y", Tensor(DType::f32, Shape{2, 2})}};
  const Network net = import_onnx(make_model(c));
  const Network back = round_trip(net);
  expect_same_graph(net, back);
  ASSERT_EQ(back.nodes().size(), 1u);  // the importer replaced the Identity by its input
  EXPECT_EQ(back.nodes()[0].inputs[0], "x");
}

}  // namespace d5::test

namespace d5::test {

TEST_F(OnnxExport, ConstantsReadAsDifferentiableBecomeConstantNodes) {
  // y = x / c with c a constant (not a parameter): an initializer would import as a parameter.
  Network net("div", 17);
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.feed_tensor("c", Tensor::from_values<float>(Shape{}, {4}));
  net.add_node({"div", "Div", "", {}, {"x", "c"}, {"y"}});
  net.add_output("y");
  ASSERT_FALSE(net.is_param("c"));
  const auto m = export_onnx(net);
  EXPECT_EQ(m.graph().initializer_size(), 0);
  ASSERT_EQ(m.graph().node_size(), 2);
  EXPECT_EQ(m.graph().node(0).op_type(), "Constant");
  EXPECT_EQ(m.graph().node(0).output(0), "c");
  const Network back = import_onnx(m);
  expect_same_graph(net, back);  // the Constant node folded back into the constant initializer 'c'
}

}  // namespace d5::test
