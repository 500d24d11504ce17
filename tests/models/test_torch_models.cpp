// Networks PyTorch exported (tests/models/export_torch_models.py): each imports, exports back to
// a model that imports to the same graph, and the re-imported network computes what PyTorch did.
// The exported models are left in D5_ONNX_EXPORTS for the ONNX checker test that follows.
#include <gtest/gtest.h>

#include <filesystem>

#include "../support/network_compare.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/net/model_zoo.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/onnx/onnx_io.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/validation.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace fs = std::filesystem;

namespace {

const char* const kModels[] = {"torch_resnet18",    "torch_mobilenet_v2", "torch_densenet121",
                               "torch_shufflenet_v2", "torch_googlenet",  "torch_squeezenet",
                               "torch_vgg11",       "torch_alexnet",      "torch_lstm",
                               "torch_transformer_encoder"};

class TorchModels : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    reference::register_all();
    fs::create_directories(D5_ONNX_EXPORTS);
  }
};

}  // namespace

TEST_P(TorchModels, ImportExportImportKeepsGraphAndOutputs) {
  const fs::path dir = fs::path(D5_TORCH_MODELS) / GetParam();
  ASSERT_TRUE(fs::exists(dir / "model.onnx")) << dir << " is missing: run the torch_models_export test first";
  const Tensor x = onnx_io::read_tensor_file((dir / "test_data_set_0" / "input_0.pb").string());
  const Tensor expected = onnx_io::read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());

  ImportOptions o;
  o.batch = x.shape()[0];  // the models exported with a symbolic batch need it; the others ignore it
  const Network net = import_onnx_file((dir / "model.onnx").string(), o);
  EXPECT_GT(net.get_params().size(), 0u);
  // Folding leaves no shape arithmetic behind: every Shape node read a tensor of known shape.
  for (const auto& n : net.nodes()) EXPECT_NE(n.op_type, "Shape") << n.name;

  const std::string exported = (fs::path(D5_ONNX_EXPORTS) / (std::string(GetParam()) + ".onnx")).string();
  export_onnx_file(net, exported);
  const Network back = import_onnx_file(exported);
  expect_same_graph(net, back);

  // The re-imported network against PyTorch's output, with the tolerance of the
  // onnx_torch_models_reference test (tests/models/CMakeLists.txt says why).
  const Tensor y = run_network_nodes(back, {{back.inputs()[0], x}}, "reference").at(back.outputs()[0]);
  ASSERT_EQ(y.desc().to_string(), expected.desc().to_string());
  double scale = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) scale = std::max(scale, std::abs(expected.get(i)));
  const auto c = compare_output(y, expected, Tolerance{1e-4, 1e-4 * scale}, 0);
  EXPECT_EQ(c.mismatches, 0) << describe_worst(c, expected.shape());
}

INSTANTIATE_TEST_SUITE_P(PyTorchExported, TorchModels, ::testing::ValuesIn(kModels));

}  // namespace d5::test

namespace d5::test {

// Forms the PyTorch models do not cover, for the checker: IR 3 (opset 8, initializers listed as
// inputs), BatchNormalization in training mode before opset 14 (5 outputs) and external data.
TEST(ExportedForms, WrittenForTheChecker) {
  reference::register_all();
  fs::create_directories(D5_ONNX_EXPORTS);
  for (int opset : {8, 9}) {
    Network net(fmt::format("bn_training_opset{}", opset), opset);
    net.add_input("x", TensorDesc{DType::f32, Shape{4, 2, 3}});
    net.feed_tensor("w", Tensor::from_values<float>(Shape{2, 2, 1}, {1, 0.5f, -1, 2}));
    for (const char* p : {"s", "b", "m", "v"}) net.feed_tensor(p, Tensor::from_values<float>(Shape{2}, {1, 0.5f}));
    net.add_node({"conv", "Conv", "", Attributes{{"kernel_shape", std::vector<int64_t>{1}}}, {"x", "w"}, {"c"}});
    net.add_node({"bn", "BatchNormalization", "", Attributes{{"training_mode", int64_t{1}}},
                  {"c", "s", "b", "m", "v"}, {"y", "rm", "rv"}});
    net.add_output("y");
    net.add_output("rm");
    net.mark_parameters_by_use();
    const std::string path = (fs::path(D5_ONNX_EXPORTS) / (net.name() + ".onnx")).string();
    ExportOptions o;
    o.external_data_threshold = opset == 9 ? 0 : -1;
    export_onnx_file(net, path, o);
    expect_same_graph(net, import_onnx_file(path));
  }
}

}  // namespace d5::test

namespace d5::test {

// The zoo's models as `d5 models export` writes them, for the checker. The zoo builds attributes
// as doubles (epsilon 1e-5) and ONNX stores FLOAT attributes in single precision, so the round
// trip is checked from the first import on: import -> export -> import gives the same graph. Models
// above 30 M parameters are left out to keep the files small.
TEST(ExportedForms, ZooModels) {
  register_builtin_operators();
  for (const auto& m : zoo_models()) {
    SCOPED_TRACE(m.name);
    ModelOptions counting;
    counting.initialize = false;
    if (build_model(m.name, counting).parameter_count() > 30'000'000) continue;
    for (bool with_loss : {false, true}) {
      ModelOptions o;
      o.with_loss = with_loss;
      const Network net = build_model(m.name, o);
      // CTCLoss and SsdLoss are deep500's operators, which ONNX's default domain lacks: refused.
      if (with_loss && (m.loss == "ctc" || m.loss == "ssd")) {
        EXPECT_THROW(export_onnx(net), InvalidArgument);
        continue;
      }
      const std::string path =
          (fs::path(D5_ONNX_EXPORTS) / fmt::format("zoo_{}{}.onnx", m.name, with_loss ? "_loss" : "")).string();
      export_onnx_file(net, path);
      const Network imported = import_onnx_file(path);
      EXPECT_EQ(imported.get_params(), net.get_params());  // the import folds the zoo's Constant nodes
      export_onnx_file(imported, path + ".again");
      expect_same_graph(imported, import_onnx_file(path + ".again"));
      fs::remove(path + ".again");
    }
  }
}

}  // namespace d5::test
