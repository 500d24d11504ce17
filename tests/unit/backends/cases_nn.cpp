// Shared cases: Conv, ConvTranspose, Gemm, MatMul and pooling against the reference, across the
// padding forms ATen expresses directly (symmetric) and those it needs explicit padding for
// (asymmetric, auto_pad SAME, pooling pads beyond half the kernel), with ceil_mode, dilations,
// groups and strides.
#include "shared_cases.h"

namespace d5::test {

namespace {

using Ints = std::vector<int64_t>;

// Conv sums C/group * kernel products: f32 results carry ~1e-6 relative rounding per term on
// each backend, differently ordered (blocked GEMM vs oneDNN/ATen), hence the f32 tolerance.
const Tolerance kConvF32{2e-4, 2e-5};

void check_conv(const std::string& type, DType t, const Shape& x, const Shape& w, bool bias, Attributes a) {
  std::vector<Tensor> in = {random_input({t, x}, "x"), random_input({t, w}, "w")};
  if (bias) in.push_back(random_input({t, Shape{type == "Conv" ? w[0] : w[1] * a.get_int("group", 1)}}, "b"));
  check(type, in, std::move(a), t == DType::f32 ? std::optional<Tolerance>(kConvF32) : std::nullopt);
}

}  // namespace

TEST(Nn, Conv) {
  for (DType t : {DType::f32, DType::f64}) {
    check_conv("Conv", t, {2, 3, 7, 6}, {4, 3, 3, 3}, true, {});
    check_conv("Conv", t, {1, 4, 8, 8}, {6, 2, 3, 2}, true,
               {{"group", int64_t{2}},
                {"strides", Ints{2, 1}},
                {"dilations", Ints{1, 2}},
                {"pads", Ints{1, 0, 1, 2}}});
    check_conv("Conv", t, {1, 2, 9}, {3, 2, 4}, false, {{"pads", Ints{2, 1}}});  // 1-D, asymmetric
    check_conv("Conv", t, {1, 2, 4, 5, 3}, {2, 2, 2, 3, 2}, true, {{"strides", Ints{1, 2, 1}}});  // 3-D
    for (const char* pad : {"SAME_UPPER", "SAME_LOWER", "VALID"})
      check_conv("Conv", t, {2, 2, 7, 8}, {3, 2, 4, 3}, true,
                 {{"auto_pad", std::string(pad)}, {"strides", Ints{2, 3}}});
    check_conv("Conv", t, {1, 3, 5, 5}, {3, 1, 3, 3}, true,
               {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}});  // depthwise
  }
}

TEST(Nn, ConvTranspose) {
  for (DType t : {DType::f32, DType::f64}) {
    check_conv("ConvTranspose", t, {2, 3, 4, 5}, {3, 2, 3, 3}, true, {});
    check_conv("ConvTranspose", t, {1, 4, 3, 3}, {4, 1, 3, 2}, true,
               {{"group", int64_t{2}},
                {"strides", Ints{2, 3}},
                {"pads", Ints{1, 0, 0, 1}},
                {"output_padding", Ints{1, 2}}});
    check_conv("ConvTranspose", t, {1, 2, 5}, {2, 3, 3}, false,
               {{"strides", Ints{2}}, {"dilations", Ints{2}}});
    check_conv("ConvTranspose", t, {1, 2, 3, 3}, {2, 2, 3, 3}, true,
               {{"strides", Ints{2, 2}}, {"output_shape", Ints{8, 5}}});  // beyond the kernels' reach and cut
    for (const char* pad : {"SAME_UPPER", "SAME_LOWER"})
      check_conv("ConvTranspose", t, {1, 2, 4, 3}, {2, 1, 3, 4}, true,
                 {{"auto_pad", std::string(pad)}, {"strides", Ints{2, 2}}});
    check_conv("ConvTranspose", t, {1, 1, 2, 2, 2}, {1, 2, 2, 2, 2}, true,
               {{"strides", Ints{2, 1, 2}}});  // 3-D
    check_conv("ConvTranspose", t, {1, 2, 4, 4}, {2, 2, 3, 3}, true,
               {{"strides", Ints{3, 3}}, {"pads", Ints{0, 2, 2, 0}}});  // wide asymmetric pads: crop path
  }
}

TEST(Nn, GemmAndMatMul) {
  for (DType t : {DType::f32, DType::f64}) {
    check("Gemm",
          {random_input({t, {3, 4}}, "a"), random_input({t, {4, 5}}, "b"), random_input({t, {5}}, "c")});
    check("Gemm",
          {random_input({t, {4, 3}}, "a"), random_input({t, {5, 4}}, "b"), random_input({t, {3, 1}}, "c")},
          {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}});
    check("Gemm", {random_input({t, {3, 4}}, "a"), random_input({t, {4, 2}}, "b")}, {{"alpha", -1.5}});
    check("Gemm",
          {random_input({t, {3, 4}}, "a"), random_input({t, {4, 2}}, "b"), random_input({t, {}}, "c")});
    for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4, 5}},
                                                                   {{2, 3, 4}, {4, 5}},
                                                                   {{4}, {4, 2}},
                                                                   {{2, 4}, {4}},
                                                                   {{4}, {4}},
                                                                   {{2, 1, 3, 4}, {5, 4, 2}}})
      check("MatMul", {random_input({t, a}, "a"), random_input({t, b}, "b")});
  }
  for (DType t : {DType::i32, DType::i64}) {
    check("Gemm",
          {random_input({t, {3, 4}}, "a", -5, 5), random_input({t, {4, 2}}, "b", -5, 5),
           random_input({t, {2}}, "c", -5, 5)},
          {{"alpha", 2.0}, {"beta", -1.0}});
    check("MatMul", {random_input({t, {2, 3, 4}}, "a", -5, 5), random_input({t, {4, 2}}, "b", -5, 5)});
  }
}

TEST(Nn, MaxPool) {
  const std::vector<Attributes> attrs = {
      {{"kernel_shape", Ints{2, 2}}},
      {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
      {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
      {{"kernel_shape", Ints{2, 3}}, {"dilations", Ints{2, 1}}, {"pads", Ints{0, 1, 1, 1}}},  // asymmetric
      {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},  // pad > kernel/2
      {{"kernel_shape", Ints{3, 3}},
       {"strides", Ints{2, 2}},
       {"pads", Ints{0, 0, 2, 1}},
       {"ceil_mode", int64_t{1}}},
      {{"kernel_shape", Ints{3, 3}}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}},
      {{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}},
      {{"kernel_shape", Ints{2, 2}}, {"storage_order", int64_t{1}}, {"pads", Ints{1, 0, 0, 1}}},
  };
  for (const auto& a : attrs)
    for (DType t : {DType::f32, DType::f64}) check("MaxPool", random_inputs({{t, {2, 3, 7, 6}}}), a);
  check("MaxPool", random_inputs({{DType::f32, {1, 2, 9}}}),
        {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{2, 0}}});
  check("MaxPool", random_inputs({{DType::f64, {1, 2, 4, 5, 4}}}),
        {{"kernel_shape", Ints{2, 2, 3}}, {"pads", Ints{1, 0, 1, 0, 1, 1}}});
  check("MaxPool", random_inputs({{DType::u8, {1, 2, 5, 5}}}, 0, 255),
        {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{0, 0, 1, 1}}});
  check("MaxPool", random_inputs({{DType::i8, {1, 2, 5, 5}}}, -100, 100),
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}});
  // Ties: the first maximum gets the gradient, on both backends.
  check("MaxPool", {Tensor::from_values<double>(Shape{1, 1, 2, 3}, {1, 1, 0, 1, 1, 0})},
        {{"kernel_shape", Ints{2, 2}}});
  // A node asking for Y alone: one output (expect_matches_reference compares the output counts).
  OpSpec y_only = spec_of("MaxPool", {{DType::f32, Shape{2, 3, 7, 6}}}, attrs[1]);
  y_only.num_outputs = 1;
  check_spec(y_only, random_inputs({{DType::f32, {2, 3, 7, 6}}}));
}

TEST(Nn, AveragePool) {
  for (int64_t include : {0, 1}) {
    const std::vector<Attributes> attrs = {
        {{"kernel_shape", Ints{2, 2}}},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
        {{"kernel_shape", Ints{3, 2}},
         {"strides", Ints{2, 2}},
         {"ceil_mode", int64_t{1}},
         {"pads", Ints{1, 0, 1, 0}}},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{0, 2, 1, 1}}},  // asymmetric, > kernel/2
        {{"kernel_shape", Ints{3, 3}},
         {"strides", Ints{2, 2}},
         {"pads", Ints{2, 0, 1, 2}},
         {"ceil_mode", int64_t{1}}},
        {{"kernel_shape", Ints{4, 3}}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{3, 2}}},
        {{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}},
    };
    for (Attributes a : attrs) {
      a.set("count_include_pad", include);
      for (DType t : {DType::f32, DType::f64}) check("AveragePool", random_inputs({{t, {2, 3, 7, 6}}}), a);
    }
    check("AveragePool", random_inputs({{DType::f64, {1, 2, 9}}}),
          {{"kernel_shape", Ints{3}},
           {"strides", Ints{2}},
           {"pads", Ints{2, 1}},
           {"count_include_pad", include}});
    check(
        "AveragePool", random_inputs({{DType::f32, {1, 2, 4, 5, 4}}}),
        {{"kernel_shape", Ints{2, 2, 3}}, {"pads", Ints{1, 0, 1, 0, 1, 1}}, {"count_include_pad", include}});
  }
}

TEST(Nn, GlobalPools) {
  for (const char* type : {"GlobalAveragePool", "GlobalMaxPool"})
    for (DType t : {DType::f32, DType::f64}) {
      check(type, random_inputs({{t, {2, 3, 4, 5}}}));
      check(type, random_inputs({{t, {2, 3, 7}}}));
      check(type, random_inputs({{t, {1, 2, 2, 3, 2}}}));
    }
  check("GlobalMaxPool", random_inputs({{DType::u8, {2, 3, 4}}}, 0, 200));
  check("GlobalMaxPool", {Tensor::from_values<double>(Shape{1, 2, 3}, {2, 2, 1, 0, -1, 0})});  // ties: first
}

}  // namespace d5::test
