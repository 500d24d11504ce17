// Opsets 18 to 22 on any ONNX library: nodes of versions the linked library does not know are
// checked against d5's copy of ONNX's schemas (src/onnx/onnx_newer_schemas.h), which is compared
// with the library wherever the library knows them.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include "../../../src/onnx/onnx_newer_schemas.h"
#include "../../support/expect_error.h"
#include "../../support/onnx_cases.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/op/op_traits.h"

namespace d5::reference {
void register_all();
}

namespace d5::test {

namespace {

using onnx_schemas::newer_schema;
using onnx_schemas::newer_schemas;
using onnx_schemas::verify_newer_schema;

class OnnxNewerOpsets : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

// y = ReduceMean(x, axes = [1]) of [[1, 2], [3, 5]] = [1.5, 4]: opset 18's form, axes an input.
CaseDef reduce_mean_case(int64_t opset) {
  CaseDef c;
  c.opset = opset;
  c.nodes = {{"ReduceMean", {"x", "axes"}, {"y"}, {int_attr("keepdims", 0)}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{2, 2}, {1, 2, 3, 5})}};
  c.initializers = {{"axes", Tensor::from_values<int64_t>(Shape{1}, {1})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{2}, {1.5F, 4})}};
  return c;
}

}  // namespace

TEST_F(OnnxNewerOpsets, Opset18FormsImportAndTheOpset17ReadingOfThemIsRefused) {
  const CaseDef c = reduce_mean_case(18);
  const Network net = import_onnx(make_model(c));
  EXPECT_EQ(net.opset(), 18);
  const auto y = run_network_nodes(net, {{"x", c.inputs[0].second}}, "reference").at("y");
  EXPECT_TRUE(allclose(y, c.outputs[0].second, 0, 0));
  // At opset 17 ReduceMean takes its axes as an attribute: input 1 breaks ReduceMean-13.
  expect_error<FormatError>([] { import_onnx(make_model(reduce_mean_case(17))); }, {"not valid ReduceMean-13"});
  // Split-18's num_outputs: two halves of [1, 2, 3, 4].
  CaseDef split;
  split.opset = 18;
  split.nodes = {{"Split", {"x"}, {"a", "b"}, {int_attr("num_outputs", 2)}}};
  split.inputs = {{"x", Tensor::from_values<float>(Shape{4}, {1, 2, 3, 4})}};
  split.outputs = {{"a", Tensor::from_values<float>(Shape{2}, {1, 2})}, {"b", Tensor::from_values<float>(Shape{2}, {3, 4})}};
  const Network halves = import_onnx(make_model(split));
  const auto out = run_network_nodes(halves, {{"x", split.inputs[0].second}}, "reference");
  EXPECT_TRUE(allclose(out.at("b"), split.outputs[1].second, 0, 0));
}

TEST_F(OnnxNewerOpsets, OperatorTypesNewerThanOpset17ImportFromTheirOpset) {
  CaseDef c;
  c.nodes = {{"Gelu", {"x"}, {"y"}}};
  c.inputs = {{"x", Tensor::from_values<float>(Shape{1}, {0})}};
  c.outputs = {{"y", Tensor::from_values<float>(Shape{1}, {0})}};
  c.opset = 20;
  EXPECT_EQ(import_onnx(make_model(c)).nodes().at(0).op_type, "Gelu");
  c.opset = 19;
  expect_error<FormatError>([&] { import_onnx(make_model(c)); }, {"ONNX has no Gelu at opset 19"});
}

TEST_F(OnnxNewerOpsets, TheTableChecksNodesAsOnnxDoes) {
  const auto* pool = newer_schema("AveragePool", 19);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->since, 19);
  EXPECT_EQ(newer_schema("AveragePool", 21)->since, 19);
  EXPECT_EQ(newer_schema("AveragePool", 22)->since, 22);
  EXPECT_EQ(newer_schema("AveragePool", 18), nullptr);  // AveragePool-11, which ONNX 1.12 knows
  EXPECT_EQ(newer_schema("Relu", 22), nullptr);        // unchanged since 14
  auto node = [](std::vector<std::string> in, std::vector<onnx::AttributeProto> attrs) {
    onnx::NodeProto n;
    n.set_op_type("AveragePool");
    for (const auto& i : in) n.add_input(i);
    n.add_output("y");
    for (const auto& a : attrs) *n.add_attribute() = a;
    return n;
  };
  onnx::AttributeProto kernel;
  kernel.set_name("kernel_shape");
  kernel.set_type(onnx::AttributeProto::INTS);
  kernel.add_ints(2);
  EXPECT_NO_THROW(verify_newer_schema(*pool, node({"x"}, {kernel}), "p"));
  const std::pair<onnx::NodeProto, std::string> broken[] = {
      {node({"x"}, {}), "required attribute 'kernel_shape' is missing"},
      {node({"x", "z"}, {kernel}), "it takes 1 to 1 inputs, the node has 2"},
      {node({""}, {kernel}), "input 0 is required, but its name is empty"},
      {node({"x"}, {kernel, int_attr("antialias", 1)}), "unrecognized attribute 'antialias'"},
      {node({"x"}, {kernel, float_attr("ceil_mode", 1)}), "attribute 'ceil_mode' must be INT, got FLOAT"},
  };
  for (const auto& [bad, why] : broken) {
    SCOPED_TRACE(why);
    const onnx::NodeProto& n = bad;  // clang before 16 cannot capture a structured binding
    expect_error<FormatError>([&] { verify_newer_schema(*pool, n, "node 'p' (AveragePool)"); },
                              {"node 'p' (AveragePool): not valid AveragePool-19: " + why});
  }
}

// Every entry is of a d5 operator type at a version 18 to 22, and every such type's versions
// are there: what scripts/gen-onnx-newer-schemas.py writes.
TEST_F(OnnxNewerOpsets, TheTableCoversOpsets18To22OfD5sTypes) {
  ASSERT_FALSE(newer_schemas().empty());
  for (const auto& s : newer_schemas()) {
    SCOPED_TRACE(std::string(s.op_type));
    const auto traits = op_traits(std::string(s.op_type));
    ASSERT_NE(traits, nullptr);
    EXPECT_GE(s.since, 18);
    EXPECT_LE(s.since, kMaxImportOpset);
    EXPECT_GE(s.since, traits->onnx_since);
  }
  // The forms of opset 18 to 20 the reference reads (docs/onnx-import-export.md).
  for (const auto& [type, since] : std::vector<std::pair<const char*, int>>{
           {"ReduceMean", 18}, {"Split", 18}, {"Pad", 18}, {"Resize", 18}, {"ScatterElements", 18}, {"Mish", 18},
           {"AveragePool", 19}, {"Pad", 19}, {"Resize", 19}, {"DFT", 20}, {"ReduceMax", 20}, {"Gelu", 20}}) {
    const auto* s = newer_schema(type, since);
    ASSERT_NE(s, nullptr) << type;
    EXPECT_EQ(s->since, since) << type;
  }
}

// Wherever the linked ONNX library knows a version, the table says what it says.
TEST_F(OnnxNewerOpsets, TheTableMatchesTheOnnxLibrary) {
  if (onnx_library_opset() < 18)
    GTEST_SKIP() << "this d5's ONNX library knows opsets up to " << onnx_library_opset()
                 << ", none of the table's; scripts/check-trixie.sh builds with ONNX 1.17, which knows them all";
  int compared = 0;
  for (const auto& s : newer_schemas()) {
    if (s.since > onnx_library_opset()) continue;
    SCOPED_TRACE(fmt::format("{}-{}", s.op_type, s.since));
    const auto* lib = onnx::OpSchemaRegistry::Schema(std::string(s.op_type), s.since, "");
    ASSERT_NE(lib, nullptr);
    EXPECT_EQ(lib->SinceVersion(), s.since);
    EXPECT_EQ(lib->min_input(), s.min_inputs);
    EXPECT_EQ(lib->max_input(), s.max_inputs);
    EXPECT_EQ(lib->min_output(), s.min_outputs);
    EXPECT_EQ(lib->max_output(), s.max_outputs);
    auto options = [](const std::vector<onnx::OpSchema::FormalParameter>& params) {
      std::string o;
      for (const auto& p : params)
        o += p.GetOption() == onnx::OpSchema::Single ? 'S' : p.GetOption() == onnx::OpSchema::Optional ? 'O' : 'V';
      return o;
    };
    EXPECT_EQ(options(lib->inputs()), s.inputs);
    EXPECT_EQ(options(lib->outputs()), s.outputs);
    ASSERT_EQ(lib->attributes().size(), s.attributes.size());
    for (const auto& a : s.attributes) {
      const auto it = lib->attributes().find(std::string(a.name));
      ASSERT_NE(it, lib->attributes().end()) << a.name;
      EXPECT_EQ(it->second.type, a.type) << a.name;
      EXPECT_EQ(it->second.required, a.required) << a.name;
    }
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

}  // namespace d5::test
