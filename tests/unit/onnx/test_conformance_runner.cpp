// The ONNX conformance runner on small cases written here with the protobuf API.
#include <gtest/gtest.h>

#include <fstream>

#include "../../support/onnx_cases.h"
#include "deep500/net/graph_executor.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/op/op_registry.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace {

ConformanceCase run_one(const CaseDef& c, const onnx::ModelProto* model = nullptr) {
  reference::register_all();
  TempDir dir("d5-conf");
  const auto path = dir.path / "test_case";
  write_case(path, c, model);
  return run_conformance_case(path.string(), {});
}

void expect_state(const ConformanceCase& r, CaseState state, const std::string& fragment) {
  EXPECT_EQ(r.state, state) << to_string(r.state) << ": " << r.detail;
  EXPECT_NE(r.detail.find(fragment), std::string::npos) << r.detail;
}

}  // namespace

TEST(Conformance, CorrectCasePasses) {
  const auto r = run_one(relu_case());
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_EQ(r.name, "test_case");
  EXPECT_EQ(r.op_types, (std::vector<std::string>{"Relu"}));
  EXPECT_TRUE(r.ops_registered);
}

TEST(Conformance, WrongExpectedOutputFailsWithWorstElementAndTolerance) {
  // 2 + 1e-3 * 2 is inside rtol 1e-3; 4.01 is not.
  const auto r = run_one(relu_case({0, 2.002f, 0, 4.01f}));
  expect_state(r, CaseState::Failed, "output 'y': 1 of 4 elements outside tolerance; worst element [3] (flat 3): got 4, "
                                     "expected 4.01");
  EXPECT_NE(r.detail.find("atol 1e-07 + rtol 0.001"), std::string::npos) << r.detail;
}

TEST(Conformance, ShapeAndDtypeMustMatch) {
  CaseDef c = relu_case();
  c.outputs[0].second = Tensor(DType::f32, Shape{2, 2});
  expect_state(run_one(c), CaseState::Failed, "output 'y' is f32[4], expected f32[2, 2]");
  c.outputs[0].second = Tensor::from_values<double>(Shape{4}, {0, 2, 0, 4});
  expect_state(run_one(c), CaseState::Failed, "output 'y' is f32[4], expected f64[4]");
}

TEST(Conformance, NaNMatchesNaN) {
  CaseDef c;
  c.nodes = {{"Log", {"x"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2}, {-1, 1})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{2}, {NAN, 0})}};
  EXPECT_EQ(run_one(c).state, CaseState::Passed);
}

TEST(Conformance, ChainsNodesUsesInitializersAndAbsentOptionalInputs) {
  // y = Clip(Neg(x), min absent, max = 1.5 from an initializer) = min(-x, 1.5).
  CaseDef c;
  c.nodes = {{"Neg", {"x"}, {"t"}}, {"Clip", {"t", "", "hi"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{3}, {-3, 1, -1})}};
  c.initializers = {{"hi", Tensor::from_values<float>(Shape{}, {1.5f})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{3}, {1.5f, -1, 1})}};
  const auto r = run_one(c);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_EQ(r.op_types, (std::vector<std::string>{"Neg", "Clip"}));
}

TEST(Conformance, AttributesReachTheOperator) {
  CaseDef c;
  c.nodes = {{"LeakyRelu", {"x"}, {"y"}, {float_attr("alpha", 0.5f)}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2}, {-2, 3})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{2}, {-1, 3})}};
  EXPECT_EQ(run_one(c).state, CaseState::Passed);
}

TEST(Conformance, UnknownOpIsUnimplementedNamingIt) {
  CaseDef c = relu_case();
  c.nodes[0].op_type = "NoSuchOp";
  const auto r = run_one(c);
  expect_state(r, CaseState::Unimplemented, "NoSuchOp");
  EXPECT_FALSE(r.ops_registered);
}

TEST(Conformance, SubgraphAttributeOfARegisteredOpIsUnimplemented) {
  const auto r = run_one(relu_case_with_graph_attribute());
  expect_state(r, CaseState::Unimplemented, "attribute 'body' is of type GRAPH");
  EXPECT_TRUE(r.ops_registered);
  EXPECT_TRUE(violates_requirement(r));
}

TEST(Conformance, OperatorInvalidArgumentFails) {
  CaseDef c;  // Sqrt is not defined on bool: the operator says so with InvalidArgument
  c.nodes = {{"Sqrt", {"x"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<bool>(Shape{1}, {true})}};
  c.outputs = {{"y", Tensor::from_values<bool>(Shape{1}, {true})}};
  expect_state(run_one(c), CaseState::Failed, "Sqrt: ");
}

TEST(Conformance, WhatD5DoesNotRunIsSkippedWithAReason) {
  CaseDef c = relu_case();
  c.nodes[0].domain = "ai.onnx.ml";
  expect_state(run_one(c), CaseState::Skipped, "is in domain 'ai.onnx.ml'");

  auto m = make_model(relu_case());
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  expect_state(run_one(relu_case(), &m), CaseState::Skipped, "input 'x' is a STRING tensor");

  m = make_model(relu_case());
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  expect_state(run_one(relu_case(), &m), CaseState::Skipped, "output 'y' is a FLOAT16 tensor");

  m = make_model(relu_case());
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_state(run_one(relu_case(), &m), CaseState::Skipped, "input 'x' is a sequence");
}

// y = x + w, w's data in w.bin beside model.onnx; both runners read it.
TEST(Conformance, ExternalDataInitializersAreRead) {
  reference::register_all();
  CaseDef c;
  c.nodes = {{"Add", {"x", "w"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2}, {1, 2})}};
  c.initializers = {{"w", Tensor::from_values<float>(Shape{2}, {10, 20})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{2}, {11, 22})}};
  auto m = make_model(c);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  const std::string bytes = w->raw_data();
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("w.bin");
  TempDir dir("d5-conf");
  const auto path = dir.path / "test_external";
  write_case(path, c, &m);
  std::ofstream(path / "w.bin", std::ios::binary) << bytes;
  for (CaseRunner runner : {CaseRunner::Nodes, CaseRunner::Network}) {
    ConformanceOptions o;
    o.runner = runner;
    const auto r = run_conformance_case(path.string(), o);
    EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
    EXPECT_EQ(r.runner, runner == CaseRunner::Nodes ? "nodes" : "network");
  }
}

TEST(Conformance, MalformedCasesFailWithoutCrashing) {
  reference::register_all();
  TempDir dir("d5-conf");
  const auto bad = dir.path / "test_bad_model";
  write_case(bad, relu_case());
  std::ofstream(bad / "model.onnx", std::ios::binary | std::ios::trunc) << std::string("\x0a\xff\xff\xff\xff\x0f", 6);
  expect_state(run_conformance_case(bad.string(), {}), CaseState::Failed, "model.onnx: not an ONNX model");

  const auto missing = dir.path / "test_missing_input";
  write_case(missing, relu_case());
  std::filesystem::remove(missing / "test_data_set_0" / "input_0.pb");
  expect_state(run_conformance_case(missing.string(), {}), CaseState::Failed, "has 0 input files, but the graph has 1");

  CaseDef dangling = relu_case();
  dangling.nodes[0].inputs = {"nowhere"};
  expect_state(run_one(dangling), CaseState::Failed, "input 'nowhere' is neither a graph input");
}

TEST(Conformance, FindsCasesRecursivelyAndFilters) {
  reference::register_all();
  TempDir dir("d5-conf");
  write_case(dir.path / "node" / "test_relu", relu_case());
  write_case(dir.path / "node" / "test_relu_wrong", relu_case({1, 1, 1, 1}));
  write_case(dir.path / "other" / "test_abs", relu_case());
  const auto found = find_conformance_cases(dir.path.string());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_NE(found[0].find("node/test_relu"), std::string::npos);

  ConformanceOptions o;
  o.filter = "^test_relu";
  const auto cases = run_conformance({dir.path.string()}, o);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].state, CaseState::Passed);
  EXPECT_EQ(cases[1].state, CaseState::Failed);

  o.filter = "[";
  EXPECT_THROW(run_conformance({dir.path.string()}, o), InvalidArgument);
  o.filter = "nothing_matches";
  EXPECT_THROW(run_conformance({dir.path.string()}, o), InvalidArgument);
  EXPECT_THROW(find_conformance_cases((dir.path / "absent").string()), IoError);
}

TEST(Conformance, ExceptionsTurnKnownFailuresIntoSkipsAndFlagStaleEntries) {
  TempDir dir("d5-conf");
  const auto file = (dir.path / "exceptions.txt").string();
  std::ofstream(file) << "# known failures\n\ntest_a  # needs int8 support\ntest_b # fixed upstream?\n";
  const auto ex = read_conformance_exceptions(file);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex.at("test_a"), "needs int8 support");

  std::vector<ConformanceCase> cases(3);
  cases[0].name = "test_a";
  cases[0].state = CaseState::Failed;
  cases[0].detail = "output 'y' ...";
  cases[1].name = "test_b";
  cases[2].name = "test_c";
  cases[2].state = CaseState::Failed;
  apply_exceptions(cases, ex);
  EXPECT_EQ(cases[0].state, CaseState::Skipped);
  EXPECT_NE(cases[0].detail.find("known failure: needs int8 support (was FAILED: output 'y'"), std::string::npos);
  EXPECT_FALSE(violates_requirement(cases[0]));
  EXPECT_EQ(cases[1].state, CaseState::Passed);
  EXPECT_TRUE(cases[1].unexpectedly_passing);
  EXPECT_TRUE(violates_requirement(cases[1]));
  EXPECT_EQ(cases[2].state, CaseState::Failed);

  std::ofstream(file) << "test_a\n";
  EXPECT_THROW(read_conformance_exceptions(file), FormatError);
  std::ofstream(file) << "test_a # x\ntest_a # y\n";
  EXPECT_THROW(read_conformance_exceptions(file), FormatError);
}

// "name@N" lists a case only when its model is of opset N: ONNX releases regenerate a case name at
// newer opsets, with other expected values.
TEST(Conformance, AnExceptionWithAnOpsetListsOnlyThatOpsetsCase) {
  TempDir dir("d5-conf");
  const auto file = (dir.path / "exceptions.txt").string();
  std::ofstream(file) << "test_dft@17  # double expected values\ntest_dft_x  # always\n";
  const auto ex = read_conformance_exceptions(file);
  std::vector<ConformanceCase> cases(3);
  for (auto& c : cases) c.state = CaseState::Failed;
  cases[0].name = cases[1].name = "test_dft";
  cases[0].opset = 17;
  cases[1].opset = 20;
  cases[2].name = "test_dft_x";
  cases[2].opset = 20;
  apply_exceptions(cases, ex);
  EXPECT_EQ(cases[0].state, CaseState::Skipped);
  EXPECT_NE(cases[0].detail.find("double expected values"), std::string::npos);
  EXPECT_EQ(cases[1].state, CaseState::Failed);  // opset 20's case is not listed
  EXPECT_EQ(cases[2].state, CaseState::Skipped);
  for (const char* bad : {"test_dft@  # x\n", "test_dft@x7  # x\n", "@17  # x\n"}) {
    SCOPED_TRACE(bad);
    std::ofstream(file) << bad;
    EXPECT_THROW(read_conformance_exceptions(file), FormatError);
  }
}

}  // namespace d5::test

namespace d5::test {

namespace {

// y = Relu(x) * 2 over a batch dimension the model leaves symbolic ("N").
CaseDef two_node_case() {
  CaseDef c;
  c.nodes = {{"Relu", {"x"}, {"r"}}, {"Add", {"r", "r"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{3, 2}, {-1, 1, 2, -2, 3, 0})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{3, 2}, {0, 2, 4, 0, 6, 0})}};
  return c;
}

onnx::ModelProto with_symbolic_batch(const CaseDef& c) {
  auto m = make_model(c);
  for (auto* v : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  return m;
}

// Stands in for a backend's graph executor: counts runs, computes with run_network_nodes.
class CountingExecutor : public GraphExecutor {
 public:
  explicit CountingExecutor(Network& net) : GraphExecutor(net) {}
  std::string backend() const override { return "test-executor"; }
  TensorMap inference(const TensorMap& feeds) override {
    ++runs;
    check_feeds(feeds);
    return run_network_nodes(network(), feeds, "reference");
  }
  TensorMap inference_and_backprop(const TensorMap&, const std::string&) override {
    D5_THROW(Unimplemented, "not needed");
  }
  std::map<std::string, std::string> implementations() const override { return {}; }
  static inline int runs = 0;
};

}  // namespace

TEST(Conformance, WholeModelsRunImportedWithSymbolicDimensionsFromTheData) {
  reference::register_all();
  const CaseDef c = two_node_case();
  const auto m = with_symbolic_batch(c);
  const auto r = run_one(c, &m);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_EQ(r.runner, "network");
  // Forced through the node runner the same case passes too.
  TempDir dir("d5-conf");
  write_case(dir.path / "case", c, &m);
  ConformanceOptions o;
  o.runner = CaseRunner::Nodes;
  const auto n = run_conformance_case((dir.path / "case").string(), o);
  EXPECT_EQ(n.state, CaseState::Passed) << n.detail;
  EXPECT_EQ(n.runner, "nodes");
}

TEST(Conformance, WholeModelsUseTheBackendsExecutorWhenOneIsRegistered) {
  reference::register_all();
  register_executor("test-executor", [](Network& net, const ExecutorOptions&) {
    return std::make_unique<CountingExecutor>(net);
  });
  const CaseDef c = two_node_case();
  TempDir dir("d5-conf");
  write_case(dir.path / "case", c);
  ConformanceOptions o;
  o.backend = "test-executor";
  CountingExecutor::runs = 0;
  const auto r = run_conformance_case((dir.path / "case").string(), o);
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_EQ(r.runner, "executor");
  EXPECT_EQ(CountingExecutor::runs, 1);
  // A wrong expected value fails through the executor as through the node runner.
  CaseDef wrong = c;
  wrong.outputs[0].second.set(2, 5.0);
  write_case(dir.path / "wrong", wrong);
  const auto w = run_conformance_case((dir.path / "wrong").string(), o);
  EXPECT_EQ(w.state, CaseState::Failed);
  EXPECT_NE(w.detail.find("got 4, expected 5"), std::string::npos) << w.detail;
}

// ONNX's suppress_by_IOU_and_scores: of six boxes, 3 and 0 survive (IoU 0.5, scores > 0.4); d5's
// selected_indices has the static bound 1 * 1 * 3 rows, the last one padding.
CaseDef nms_case(std::vector<int64_t> expected_rows) {
  CaseDef c;
  c.opset = 11;
  c.nodes = {{"NonMaxSuppression", {"boxes", "scores", "max", "iou", "score"}, {"selected"}}};
  c.inputs = {{"boxes", Tensor::from_values<float>(Shape{1, 6, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                                                    0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101})},
              {"scores", Tensor::from_values<float>(Shape{1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f})}};
  c.initializers = {{"max", Tensor::from_values<int64_t>(Shape{1}, {3})},
                    {"iou", Tensor::from_values<float>(Shape{1}, {0.5f})},
                    {"score", Tensor::from_values<float>(Shape{1}, {0.4f})}};
  Tensor y(DType::i64, Shape{static_cast<int64_t>(expected_rows.size() / 3), 3});
  std::copy(expected_rows.begin(), expected_rows.end(), y.data_as<int64_t>());
  c.outputs = {{"selected", y}};
  return c;
}

TEST(Conformance, PaddedOutputsMatchTheirRowsAndHoldOnlyPaddingPastThem) {
  const auto ok = run_one(nms_case({0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(ok.state, CaseState::Passed) << ok.detail;
  // Through the importer, the network runner reads the same bound.
  TempDir dir("d5-conf");
  write_case(dir.path / "case", nms_case({0, 0, 3, 0, 0, 0}));
  ConformanceOptions o;
  o.runner = CaseRunner::Network;
  const auto net = run_conformance_case((dir.path / "case").string(), o);
  EXPECT_EQ(net.state, CaseState::Passed) << net.detail;
  EXPECT_EQ(net.runner, "network");
  // The importer takes a declared length up to the bound, not past it.
  write_case(dir.path / "long", nms_case({0, 0, 3, 0, 0, 0, 0, 0, 5, 0, 0, 1}));
  expect_state(run_conformance_case((dir.path / "long").string(), o), CaseState::Failed,
               "graph output 'selected' is declared with shape [4, 3]");
  // A wrong real row fails; so does a real row where the expected output has ended, and a bound
  // shorter than the expected output.
  expect_state(run_one(nms_case({0, 0, 3, 0, 0, 1})), CaseState::Failed,
               "output 'selected': 1 of 6 elements of its first 2 rows outside tolerance");
  expect_state(run_one(nms_case({0, 0, 3})), CaseState::Failed,
               "output 'selected': row 1 holds 0 at flat 3, but the expected output has 1 rows");
  expect_state(run_one(nms_case({0, 0, 3, 0, 0, 0, 0, 0, 5, 0, 0, 1})), CaseState::Failed,
               "output 'selected' is i64[3, 3], expected i64[4, 3] (a padded output");
}

TEST(Conformance, DataThatContradictsTheDeclaredInputFails) {
  reference::register_all();
  CaseDef c = two_node_case();
  auto m = make_model(c);  // declares x as [3, 2]
  c.inputs[0].second = Tensor(DType::f32, Shape{2, 2});
  const auto r = run_one(c, &m);
  EXPECT_EQ(r.state, CaseState::Failed);
  EXPECT_NE(r.detail.find("graph input 'x' is f32[2, 2], but the graph declares f32[3, 2]"), std::string::npos)
      << r.detail;
}

}  // namespace d5::test
