#include <gtest/gtest.h>

#include "deep500/core/error.h"
#include "deep500/net/network.h"
#include "deep500/op/op_registry.h"

namespace d5 {
namespace reference {
void register_all();  // the reference backend's operators: the oracle for shapes
}
namespace {

class NetworkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

// x[2,3] -> Gemm(W[4,3]^T, b[4]) -> Relu -> y
Network small_mlp() {
  Network net("mlp");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 3}});
  net.feed_tensor("W", Tensor(DType::f32, Shape{4, 3}), true);
  net.feed_tensor("b", Tensor(DType::f32, Shape{4}), true);
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"x", "W", "b"}, {"h"}});
  net.add_node({"act", "Relu", "", {}, {"h"}, {"y"}});
  net.add_output("y");
  return net;
}

TEST_F(NetworkTest, InfersShapesThroughReferenceOperators) {
  Network net = small_mlp();
  net.infer();
  EXPECT_EQ(net.desc("h").shape, (Shape{2, 4}));
  EXPECT_EQ(net.desc("y").dtype, DType::f32);
  EXPECT_EQ(net.spec("fc").inputs.size(), 3u);
  EXPECT_EQ(net.get_params(), (std::vector<std::string>{"W", "b"}));
  EXPECT_EQ(net.parameter_count(), 16);
  ASSERT_EQ(net.gradient().size(), 2u);
  EXPECT_EQ(net.gradient()[0].second, "W@grad");
  EXPECT_EQ(net.input_nodes().size(), 1u);
  EXPECT_EQ(net.output_nodes()[0]->name, "act");
}

TEST_F(NetworkTest, TopologicalOrderIsStableAndIndependentOfInsertion) {
  Network net("n");
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.add_node({"b", "Relu", "", {}, {"a_out"}, {"b_out"}});  // reads a tensor produced later
  net.add_node({"a", "Neg", "", {}, {"x"}, {"a_out"}});
  net.add_output("b_out");
  auto order = net.topological_order();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0]->name, "a");
  EXPECT_EQ(order[1]->name, "b");
}

TEST_F(NetworkTest, CycleIsAFormatErrorNamingANodeOnIt) {
  Network net("n");
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.add_node({"head", "Neg", "", {}, {"x"}, {"h"}});
  net.add_node({"p", "Add", "", {}, {"h", "q_out"}, {"p_out"}});
  net.add_node({"q", "Relu", "", {}, {"p_out"}, {"q_out"}});
  net.add_output("p_out");
  try {
    net.infer();
    FAIL() << "no error";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cycle"), std::string::npos) << m;
    EXPECT_TRUE(m.find("'p'") != std::string::npos || m.find("'q'") != std::string::npos) << m;
  }
}

TEST_F(NetworkTest, DanglingInputAndMissingOutputAreNamed) {
  Network net("n");
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.add_node({"add", "Add", "", {}, {"x", "bias"}, {"y"}});
  net.add_output("y");
  try {
    net.infer();
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'add' (Add) reads 'bias'"), std::string::npos) << e.what();
  }
  Network net2("n2");
  net2.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net2.add_output("nothing");
  EXPECT_THROW(net2.infer(), FormatError);
}

TEST_F(NetworkTest, ShapeMismatchNamesTheNode) {
  Network net("n");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 3}});
  net.feed_tensor("W", Tensor(DType::f32, Shape{5, 4}), true);
  net.add_node({"mm", "MatMul", "", {}, {"x", "W"}, {"y"}});
  net.add_output("y");
  try {
    net.infer();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'mm'"), std::string::npos) << e.what();
  }
}

TEST_F(NetworkTest, DuplicateProducerAndUnknownOpAreRejected) {
  Network net = small_mlp();
  EXPECT_THROW(net.add_node({"again", "Neg", "", {}, {"x"}, {"h"}}), InvalidArgument);
  net.add_node({"odd", "NoSuchOp", "", {}, {"y"}, {"z"}});
  EXPECT_THROW(net.infer(), Unimplemented);
}

// What PyTorch exports for x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
TEST_F(NetworkTest, FoldsShapeChainsIntoConstants) {
  Network net("flatten");
  net.add_input("x", TensorDesc{DType::f32, Shape{3, 2, 5}});
  net.feed_tensor("zero", Tensor::from_values<int64_t>(Shape{}, {0}));
  net.feed_tensor("minus1", Tensor::from_values<int64_t>(Shape{1}, {-1}));
  net.feed_tensor("axes0", Tensor::from_values<int64_t>(Shape{1}, {0}));
  net.add_node({"shape", "Shape", "", {}, {"x"}, {"s"}});
  net.add_node({"gather", "Gather", "", Attributes{{"axis", int64_t{0}}}, {"s", "zero"}, {"n"}});
  net.add_node({"unsq", "Unsqueeze", "", {}, {"n", "axes0"}, {"n1"}});
  net.add_node({"cat", "Concat", "", Attributes{{"axis", int64_t{0}}}, {"n1", "minus1"}, {"target"}});
  net.add_node({"reshape", "Reshape", "", {}, {"x", "target"}, {"y"}});
  net.add_output("y");
  EXPECT_EQ(net.desc("y").shape, (Shape{3, 10}));
  EXPECT_TRUE(net.is_folded("cat"));
  EXPECT_FALSE(net.is_folded("reshape"));
  ASSERT_NE(net.known_value("target"), nullptr);
  EXPECT_EQ(net.known_value("target")->get(0), 3);
  EXPECT_EQ(net.fold_constants(), 4);
  ASSERT_EQ(net.nodes().size(), 1u);
  EXPECT_EQ(net.nodes()[0].name, "reshape");
  EXPECT_EQ(net.initializers(), (std::vector<std::string>{"target"}));
  EXPECT_EQ(net.desc("y").shape, (Shape{3, 10}));
}

TEST_F(NetworkTest, ParametersAreNeverFoldedThrough) {
  Network net("p");
  net.add_input("x", TensorDesc{DType::f32, Shape{2}});
  net.feed_tensor("w", Tensor::from_values<float>(Shape{2}, {1, 2}), true);
  net.add_node({"neg", "Neg", "", {}, {"w"}, {"nw"}});
  net.add_node({"add", "Add", "", {}, {"x", "nw"}, {"y"}});
  net.add_output("y");
  net.infer();
  EXPECT_FALSE(net.is_folded("neg"));
  net.set_param("w", false);
  EXPECT_TRUE(net.is_folded("neg"));
}

TEST_F(NetworkTest, MarkParametersByUseSkipsStatisticsAndShapes) {
  Network net("bn");
  net.add_input("x", TensorDesc{DType::f32, Shape{2, 3, 4}});
  for (const char* n : {"scale", "bias", "mean", "var"}) net.feed_tensor(n, Tensor(DType::f32, Shape{3}));
  net.feed_tensor("shape", Tensor::from_values<int64_t>(Shape{2}, {2, 12}));
  net.add_node({"bn", "BatchNormalization", "", {}, {"x", "scale", "bias", "mean", "var"}, {"y"}});
  net.add_node({"r", "Reshape", "", {}, {"y", "shape"}, {"z"}});
  net.add_output("z");
  EXPECT_EQ(net.mark_parameters_by_use(), 2);
  EXPECT_EQ(net.get_params(), (std::vector<std::string>{"bias", "scale"}));
  EXPECT_EQ(net.desc("z").shape, (Shape{2, 12}));
}

TEST_F(NetworkTest, GraphEditingRewiresAndRemovesDeadNodes) {
  Network net = small_mlp();
  net.add_node({"extra", "Neg", "", {}, {"y"}, {"unused"}});
  EXPECT_EQ(net.remove_dead_nodes(), 1);
  // Skip the Relu: the output reads the Gemm directly.
  net.replace_uses("y", "h");
  net.remove_node("act");
  EXPECT_EQ(net.outputs(), (std::vector<std::string>{"h"}));
  EXPECT_EQ(net.desc("h").shape, (Shape{2, 4}));
  net.add_node({"act2", "Sigmoid", "", {}, {"x"}, {"s"}});
  net.rewire("act2", 0, "h");
  EXPECT_EQ(net.consumers("h").size(), 1u);
  EXPECT_EQ(net.producer("s")->name, "act2");
  EXPECT_EQ(net.unique_name("h"), "h_1");
}

TEST_F(NetworkTest, FeedAndFetch) {
  Network net = small_mlp();
  EXPECT_THROW(net.fetch_tensor("y"), InvalidArgument);
  EXPECT_THROW(net.feed_tensor("W", Tensor(DType::f32, Shape{3, 4})), InvalidArgument);
  net.feed_tensor("W", Tensor::from_values<float>(Shape{4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(net.fetch_tensor("W").get(5), 6);
  net.feed_tensor("y", Tensor(DType::f32, Shape{2, 4}));  // as an executor stores an output
  EXPECT_TRUE(net.has_value("y"));
  EXPECT_FALSE(net.is_initializer("y"));
  net.feed_tensor(Network::gradient_name("W"), Tensor(DType::f32, Shape{4, 3}));
  EXPECT_FALSE(net.is_initializer("W@grad"));
  EXPECT_EQ(net.fetch_tensors({"W", "b"}).size(), 2u);
  // Released values are gone; initializers cannot be released; releasing nothing is harmless.
  net.release_value("W@grad");
  EXPECT_FALSE(net.has_value("W@grad"));
  net.release_value("W@grad");
  EXPECT_THROW(net.release_value("W"), InvalidArgument);
  EXPECT_TRUE(net.has_value("W"));
}

}  // namespace
}  // namespace d5
