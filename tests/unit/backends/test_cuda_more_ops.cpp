// The CUDA backend's constant, comparison, logic, Cast, arg-extreme, variadic, CumSum,
// InstanceNormalization and ConvTranspose operators against the reference on a GPU: one
// representative case of each, with integer and bool cases for the kernels that dispatch on the
// element type. The shared operator cases (d5_test_op_cases) run the rest.
#include <gtest/gtest.h>

#include <optional>

#include "../ops/op_test_util.h"
#include "backend_test_util.h"
#include "cuda_test_util.h"

namespace d5::test {
namespace {

Tensor rand_of(DType t, const Shape& s, const std::string& name, double lo = -1, double hi = 1) {
  return random_input(TensorDesc{t, s}, name, lo, hi);
}

// A spec of `inputs`; those at `known` are given as values known at creation.
OpSpec spec_for(const std::string& type, const std::vector<Tensor>& inputs, Attributes attrs = {},
                const std::vector<size_t>& known = {}) {
  std::vector<TensorDesc> descs;
  for (const auto& t : inputs) descs.push_back(t.desc());
  std::vector<std::optional<Tensor>> values;
  if (!known.empty()) {
    values.resize(inputs.size());
    for (size_t i : known) values[i] = inputs[i];
  }
  return spec_of(type, descs, std::move(attrs), std::move(values));
}

TEST(CudaMoreOperators, ConstantsAreMadeOnTheDevice) {
  D5_REQUIRE_GPU();
  const Tensor value = rand_of(DType::f32, Shape{2, 3}, "value");
  expect_matches_reference(spec_for("Constant", {}, Attributes{{"value", value}}), {}, "cuda");
  expect_matches_reference(spec_for("Constant", {}, Attributes{{"value_ints", std::vector<int64_t>{3, -1, 7}}}), {},
                           "cuda");
  expect_matches_reference(spec_for("Constant", {}, Attributes{{"value_float", 2.5}}), {}, "cuda");
  expect_matches_reference(
      spec_for("Constant", {}, Attributes{{"value", Tensor::from_values<bool>(Shape{3}, {true, false, true})}}), {},
      "cuda");

  const std::vector<Tensor> shape = {Tensor::from_values<int64_t>(Shape{3}, {2, 3, 4})};
  expect_matches_reference(
      spec_for("ConstantOfShape", shape, Attributes{{"value", Tensor::from_values<int64_t>(Shape{1}, {-7})}}, {0}),
      shape, "cuda");
  expect_matches_reference(spec_for("ConstantOfShape", shape, {}, {0}), shape, "cuda");

  const std::vector<Tensor> x = {rand_of(DType::f32, Shape{2, 3, 4, 5}, "x")};
  expect_matches_reference(spec_for("Shape", x), x, "cuda");
  expect_matches_reference(spec_for("Shape", x, Attributes{{"start", int64_t{1}}, {"end", int64_t{-1}}}), x, "cuda");
}

TEST(CudaMoreOperators, ComparisonsAndLogicBroadcastInEveryDtype) {
  D5_REQUIRE_GPU();
  {
    const std::vector<Tensor> in = {rand_of(DType::f32, Shape{2, 3, 4}, "a"), rand_of(DType::f32, Shape{3, 1}, "b")};
    for (const char* type : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"}) {
      SCOPED_TRACE(type);
      expect_matches_reference(spec_for(type, in), in, "cuda");
    }
  }
  {  // small integers: many ties
    const std::vector<Tensor> in = {rand_of(DType::i64, Shape{4, 5}, "a", -2, 2),
                                    rand_of(DType::i64, Shape{5}, "b", -2, 2)};
    for (const char* type : {"Equal", "Less", "GreaterOrEqual"}) {
      SCOPED_TRACE(std::string(type) + " i64");
      expect_matches_reference(spec_for(type, in), in, "cuda");
    }
    const std::vector<Tensor> in32 = {rand_of(DType::i32, Shape{3, 1, 2}, "a", -2, 2),
                                      rand_of(DType::i32, Shape{4, 1}, "b", -2, 2)};
    expect_matches_reference(spec_for("Greater", in32), in32, "cuda");
  }
  {
    const std::vector<Tensor> in = {rand_of(DType::boolean, Shape{3, 4}, "p", 0, 2),
                                    rand_of(DType::boolean, Shape{4}, "q", 0, 2)};
    for (const char* type : {"And", "Or", "Xor", "Equal"}) {
      SCOPED_TRACE(std::string(type) + " bool");
      expect_matches_reference(spec_for(type, in), in, "cuda");
    }
    const std::vector<Tensor> one = {in[0]};
    expect_matches_reference(spec_for("Not", one), one, "cuda");
  }
}

TEST(CudaMoreOperators, CastFollowsTheReferenceRules) {
  D5_REQUIRE_GPU();
  struct Case {
    DType from;
    int64_t to;  // ONNX code
    double lo, hi;
  };
  // 1 FLOAT, 6 INT32, 7 INT64, 9 BOOL, 10 FLOAT16, 11 DOUBLE, 16 BFLOAT16, 2 UINT8
  const Case cases[] = {{DType::f32, 7, -5, 5},   {DType::f32, 6, -300, 300}, {DType::i64, 1, -1000, 1000},
                        {DType::f32, 10, -3, 3},  {DType::f16, 1, -3, 3},     {DType::f32, 16, -3, 3},
                        {DType::f32, 9, -1, 1},   {DType::boolean, 1, 0, 2},  {DType::i32, 7, -100, 100},
                        {DType::i64, 9, -2, 2},   {DType::f32, 11, -1, 1},    {DType::f64, 1, -1, 1},
                        {DType::f32, 2, 0, 255},  {DType::i64, 10, -50, 50}};
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("{} to ONNX type {}", to_string(c.from), c.to));
    const std::vector<Tensor> in = {rand_of(c.from, Shape{5, 7}, "x", c.lo, c.hi)};
    expect_matches_reference(spec_for("Cast", in, Attributes{{"to", c.to}}), in, "cuda");
  }
  // A float beyond the integer type: the same InvalidArgument as the reference.
  register_builtin_operators();
  const std::vector<Tensor> big = {Tensor::from_values<float>(Shape{3}, {1.0f, 3e9f, -1.0f})};
  auto op = OpRegistry::global().create(spec_for("Cast", big, Attributes{{"to", int64_t{6}}}), "cuda");
  EXPECT_THROW(op->run_forward(to_device(big, op->device())), InvalidArgument);
}

TEST(CudaMoreOperators, ArgMaxAndArgMinPickTheReferencesIndex) {
  D5_REQUIRE_GPU();
  const std::vector<Tensor> x = {rand_of(DType::f32, Shape{3, 6, 4}, "x")};
  expect_matches_reference(spec_for("ArgMax", x, Attributes{{"axis", int64_t{1}}}), x, "cuda");
  expect_matches_reference(spec_for("ArgMin", x, Attributes{{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}}), x,
                           "cuda");
  // Ties everywhere: the first or (select_last_index) the last.
  const std::vector<Tensor> ints = {rand_of(DType::i32, Shape{4, 9}, "i", -2, 2)};
  for (int64_t last : {0, 1}) {
    SCOPED_TRACE(last);
    expect_matches_reference(
        spec_for("ArgMax", ints, Attributes{{"axis", int64_t{1}}, {"select_last_index", last}}), ints, "cuda");
    expect_matches_reference(
        spec_for("ArgMin", ints, Attributes{{"axis", int64_t{0}}, {"select_last_index", last}}), ints, "cuda");
  }
}

TEST(CudaMoreOperators, VariadicOperatorsBroadcastAndFoldTheirGradients) {
  D5_REQUIRE_GPU();
  const std::vector<Tensor> in = {rand_of(DType::f32, Shape{2, 3, 4}, "a"), rand_of(DType::f32, Shape{3, 1}, "b"),
                                  rand_of(DType::f32, Shape{4}, "c")};
  for (const char* type : {"Sum", "Mean", "Max", "Min"}) {
    SCOPED_TRACE(type);
    expect_matches_reference(spec_for(type, in), in, "cuda");
    const std::vector<Tensor> one = {in[0]};
    expect_matches_reference(spec_for(type, one), one, "cuda");
  }
  const std::vector<Tensor> ints = {rand_of(DType::i64, Shape{3, 4}, "a", -5, 5), rand_of(DType::i64, Shape{4}, "b", -5, 5)};
  for (const char* type : {"Max", "Min"}) {
    SCOPED_TRACE(std::string(type) + " i64");
    expect_matches_reference(spec_for(type, ints), ints, "cuda");
  }
}

TEST(CudaMoreOperators, CumSumScansEveryWayAndReadsItsAxisFromTheDevice) {
  D5_REQUIRE_GPU();
  const Tensor x = rand_of(DType::f32, Shape{3, 4, 5}, "x");
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1}) {
      SCOPED_TRACE(fmt::format("exclusive {} reverse {}", exclusive, reverse));
      const std::vector<Tensor> in = {x, Tensor::from_values<int64_t>(Shape{}, {1})};
      const Attributes a{{"exclusive", exclusive}, {"reverse", reverse}};
      expect_matches_reference(spec_for("CumSum", in, a, {1}), in, "cuda");
      // An axis not known at creation (int32, negative) is read back from the device.
      const std::vector<Tensor> dyn = {x, Tensor::from_values<int32_t>(Shape{}, {-1})};
      expect_matches_reference(spec_for("CumSum", dyn, a), dyn, "cuda");
    }
  const std::vector<Tensor> ints = {rand_of(DType::i64, Shape{6, 3}, "i", -100, 100),
                                    Tensor::from_values<int64_t>(Shape{1}, {0})};
  expect_matches_reference(spec_for("CumSum", ints, {}, {1}), ints, "cuda");
}

TEST(CudaMoreOperators, InstanceNormalizationAndItsGradients) {
  D5_REQUIRE_GPU();
  const std::vector<Tensor> in = {rand_of(DType::f32, Shape{2, 3, 4, 5}, "x", -2, 3),
                                  rand_of(DType::f32, Shape{3}, "scale"), rand_of(DType::f32, Shape{3}, "b")};
  expect_matches_reference(spec_for("InstanceNormalization", in, Attributes{{"epsilon", 1e-3}}), in, "cuda");
  // A row longer than a block: the strided loops and the tree.
  const std::vector<Tensor> wide = {rand_of(DType::f32, Shape{1, 2, 700}, "x"), rand_of(DType::f32, Shape{2}, "scale"),
                                    rand_of(DType::f32, Shape{2}, "b")};
  expect_matches_reference(spec_for("InstanceNormalization", wide), wide, "cuda");
}

TEST(CudaMoreOperators, ConvTransposeRunsOnCudnnsBackwardData) {
  D5_REQUIRE_GPU();
  struct Case {
    Shape x, w;
    Attributes attrs;
    bool bias;
  };
  const std::vector<Case> cases = {
      {Shape{2, 4, 5, 5}, Shape{4, 3, 3, 3},
       Attributes{{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                  {"output_padding", std::vector<int64_t>{1, 1}}},
       true},
      {Shape{1, 4, 6, 5}, Shape{4, 2, 3, 2}, Attributes{{"group", int64_t{2}}, {"dilations", std::vector<int64_t>{2, 1}}},
       false},
      {Shape{2, 3, 7}, Shape{3, 2, 4}, Attributes{{"strides", std::vector<int64_t>{3}}}, true},
      {Shape{1, 2, 3, 3, 3}, Shape{2, 2, 2, 2, 2}, Attributes{}, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " " + c.w.to_string());
    std::vector<Tensor> in = {rand_of(DType::f32, c.x, "x"), rand_of(DType::f32, c.w, "w")};
    if (c.bias) in.push_back(rand_of(DType::f32, Shape{c.w[1] * c.attrs.get_int("group", 1)}, "b"));
    expect_matches_reference(spec_for("ConvTranspose", in, c.attrs), in, "cuda");
  }
}

TEST(CudaMoreOperators, UnsupportedDtypesAreRefusedNamingThem) {
  D5_REQUIRE_GPU();
  register_builtin_operators();
  const std::vector<Tensor> in = {rand_of(DType::f64, Shape{3}, "a"), rand_of(DType::f64, Shape{3}, "b")};
  try {
    OpRegistry::global().create(spec_for("Sum", in), "cuda");
    FAIL() << "Sum of f64 was created";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d5::test
