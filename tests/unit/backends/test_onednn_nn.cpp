// oneDNN Conv, ConvTranspose, pooling, MatMul and Gemm against the reference.
//
// Tolerance: a convolution or matrix product sums K = C/group * kernel taps (forward), or
// N * positions terms (weight gradients), of products of values in [-1, 1]. oneDNN accumulates
// in f32 in blocked orders, the reference in double: the difference grows like
// sqrt(K) * 2^-24 * |terms| for random signs, at most K * 2^-24 * |terms|. Measured here: at most
// 2e-5 absolute on results up to ~30 (the 64-channel case, K = 576), none above 3e-6 elsewhere.
// rtol 1e-4 with atol 1e-4 leaves a margin of five and catches any wrong tap or offset (those
// give errors of order 1). Should oneDNN pick Winograd (convolution_auto may), its transforms
// lose about 1e-4 relative, and the tolerance for that case becomes rtol 1e-3. Pooling computes
// each output from one window: max is exact, average differs by a rounding or two (rtol 1e-5).
#include "onednn_test_util.h"

namespace d5::test {

namespace {
const Tolerance kConvTol{1e-4, 1e-4};
const Tolerance kWinogradTol{1e-3, 1e-4};
const Tolerance kGemmTol{1e-4, 1e-4};
const Tolerance kPoolTol{1e-5, 1e-6};

Tolerance conv_tolerance(const OpSpec& spec) {
  return onednn_implementation(spec).find("wino") != std::string::npos ? kWinogradTol : kConvTol;
}

Attributes with(Attributes a, const std::string& k, AttrValue v) {
  a.set(k, std::move(v));
  return a;
}
using Ints = std::vector<int64_t>;

OpSpec conv_spec(const std::string& type, const Shape& x, const Shape& w, bool bias, Attributes attrs) {
  std::vector<TensorDesc> in = {{DType::f32, x}, {DType::f32, w}};
  const int64_t group = attrs.get_int("group", 1);
  if (bias) in.push_back({DType::f32, Shape{type == "Conv" ? w[0] : w[1] * group}});
  return spec_of(type, in, std::move(attrs));
}

}  // namespace

TEST(OnednnConv, MatchesReference) {
  const Attributes pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  struct Case {
    Shape x, w;
    bool bias;
    Attributes attrs;
  };
  const Case cases[] = {
      {Shape{2, 3, 7, 7}, Shape{4, 3, 3, 3}, true, pad1},
      {Shape{1, 4, 9, 8}, Shape{6, 4, 3, 2}, true, {{"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}}},
      {Shape{2, 6, 8, 8}, Shape{9, 2, 3, 3}, false, {{"group", int64_t{3}}}},
      {Shape{1, 8, 6, 6}, Shape{8, 1, 3, 3}, true, with(pad1, "group", int64_t{8})},  // depthwise
      {Shape{1, 3, 10, 10}, Shape{5, 3, 3, 3}, true, {{"dilations", Ints{2, 3}}, {"pads", Ints{2, 2, 2, 2}}}},
      {Shape{1, 2, 7, 7},
       Shape{3, 2, 4, 4},
       true,
       {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {Shape{1, 2, 7, 6}, Shape{3, 2, 2, 3}, false, {{"auto_pad", std::string("SAME_LOWER")}}},
      {Shape{1, 2, 7, 6}, Shape{3, 2, 2, 3}, false, {{"auto_pad", std::string("VALID")}}},
      {Shape{2, 3, 11}, Shape{4, 3, 3}, true, {{"strides", Ints{2}}}},                         // 1-D
      {Shape{1, 2, 5, 6, 7}, Shape{3, 2, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1, 1, 1}}}},  // 3-D
      {Shape{2, 16, 5, 5}, Shape{8, 16, 1, 1}, true, {}},                                      // 1x1
      {Shape{2, 64, 14, 14}, Shape{64, 64, 3, 3}, true, pad1},  // where Winograd may run
  };
  for (const auto& c : cases) {
    const auto spec = conv_spec("Conv", c.x, c.w, c.bias, c.attrs);
    expect_matches_reference(spec, random_inputs(spec), "onednn", conv_tolerance(spec));
  }
}

TEST(OnednnConvTranspose, MatchesReference) {
  struct Case {
    Shape x, w;
    bool bias;
    Attributes attrs;
  };
  const Case cases[] = {
      {Shape{1, 3, 4, 4},
       Shape{3, 2, 3, 3},
       true,
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}},
      {Shape{2, 4, 5, 5}, Shape{4, 3, 3, 3}, true, {{"group", int64_t{2}}}},
      {Shape{1, 2, 3, 3}, Shape{2, 3, 3, 3}, false, {{"strides", Ints{2, 2}}, {"output_shape", Ints{6, 6}}}},
      {Shape{1, 2, 5, 5}, Shape{2, 2, 3, 3}, true, {{"dilations", Ints{2, 2}}, {"pads", Ints{1, 0, 2, 1}}}},
      {Shape{2, 3, 6}, Shape{3, 4, 3}, true, {{"strides", Ints{3}}, {"pads", Ints{1, 2}}}},  // 1-D
      {Shape{1, 2, 4, 5},
       Shape{2, 2, 3, 3},
       true,
       {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {Shape{1, 2, 3, 3, 3}, Shape{2, 2, 2, 2, 2}, true, {{"strides", Ints{2, 2, 2}}}},  // 3-D
  };
  for (const auto& c : cases) {
    const auto spec = conv_spec("ConvTranspose", c.x, c.w, c.bias, c.attrs);
    expect_matches_reference(spec, random_inputs(spec), "onednn", conv_tolerance(spec));
  }
}

TEST(OnednnConv, InvalidSpecsAreInvalidEverywhere) {
  const auto spec = conv_spec("Conv", Shape{1, 4, 5, 5}, Shape{2, 3, 3, 3}, false, {});
  EXPECT_EQ(onednn_answer(spec).rfind("invalid:", 0), 0u) << onednn_answer(spec);
}

namespace {
struct PoolCase {
  Shape x;
  Attributes attrs;
};
const PoolCase kPools[] = {
    {Shape{2, 3, 9, 9}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
    {Shape{1, 2, 8, 8}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}},
    {Shape{1, 2, 7, 7}, {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}},
    {Shape{1, 2, 6, 7}, {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{1, 2}}, {"pads", Ints{0, 1, 1, 0}}}},
    {Shape{2, 3, 10}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}}},
    {Shape{1, 2, 5, 5, 5}, {{"kernel_shape", Ints{2, 2, 2}}}},
    {Shape{1, 1, 8, 8},
     {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
    {Shape{4, 16, 14, 14}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
};
}  // namespace

TEST(OnednnPool, MaxPoolMatchesReference) {
  for (const auto& c : kPools) {
    auto spec = spec_of("MaxPool", {{DType::f32, c.x}}, c.attrs);
    spec.num_outputs = 1;  // Y alone, on both backends
    // Distinct values: a tie would make "which maximum" a matter of tie-breaking.
    expect_matches_reference(spec, random_inputs(spec), "onednn", kPoolTol);
  }
}

TEST(OnednnPool, AveragePoolMatchesReference) {
  for (int64_t include : {0, 1}) {
    for (const auto& c : kPools) {
      const auto spec =
          spec_of("AveragePool", {{DType::f32, c.x}}, with(c.attrs, "count_include_pad", include));
      if (onednn_answer(spec) != "accepts") continue;  // ceil_mode + include_pad, checked below
      expect_matches_reference(spec, random_inputs(spec), "onednn", kPoolTol);
    }
  }
  // ceil_mode whose last window stays inside the pads: include_pad agrees with ONNX.
  const auto spec = spec_of("AveragePool", {{DType::f32, Shape{1, 2, 9, 9}}},
                            {{"kernel_shape", Ints{3, 3}},
                             {"strides", Ints{2, 2}},
                             {"pads", Ints{1, 1, 1, 1}},
                             {"ceil_mode", int64_t{1}},
                             {"count_include_pad", int64_t{1}}});
  expect_matches_reference(spec, random_inputs(spec), "onednn", kPoolTol);
}

TEST(OnednnPool, GlobalPoolsMatchReference) {
  for (const Shape& x : {Shape{2, 3, 5, 7}, Shape{2, 3, 4}, Shape{1, 2, 3, 3, 3}}) {
    expect_matches_reference(spec_of("GlobalAveragePool", {{DType::f32, x}}),
                             random_inputs(spec_of("GlobalAveragePool", {{DType::f32, x}})), "onednn",
                             kPoolTol);
    expect_matches_reference(spec_of("GlobalMaxPool", {{DType::f32, x}}),
                             random_inputs(spec_of("GlobalMaxPool", {{DType::f32, x}})), "onednn", kPoolTol);
  }
}

TEST(OnednnPool, RefusesWhatItCannotExpress) {
  const Attributes ceil = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}};
  auto avg =
      spec_of("AveragePool", {{DType::f32, Shape{1, 2, 8, 8}}}, with(ceil, "count_include_pad", int64_t{1}));
  EXPECT_NE(onednn_answer(avg).find("count_include_pad"), std::string::npos) << onednn_answer(avg);
  auto max = spec_of("MaxPool", {{DType::f32, Shape{1, 2, 8, 8}}}, ceil);
  max.num_outputs = 2;
  EXPECT_NE(onednn_answer(max).find("Indices"), std::string::npos) << onednn_answer(max);
  max.num_outputs = -1;
  EXPECT_NE(onednn_answer(max).find("Indices"), std::string::npos) << onednn_answer(max);
}

TEST(OnednnMatMul, MatchesReferenceWithBroadcasting) {
  struct Case {
    Shape a, b;
  };
  for (const auto& c :
       {Case{Shape{5, 7}, Shape{7, 3}}, Case{Shape{2, 5, 7}, Shape{2, 7, 3}},
        Case{Shape{2, 5, 7}, Shape{7, 3}}, Case{Shape{7}, Shape{2, 7, 3}}, Case{Shape{3, 5, 7}, Shape{7}},
        Case{Shape{7}, Shape{7}}, Case{Shape{2, 1, 4, 6}, Shape{3, 6, 5}},
        Case{Shape{1, 4, 6}, Shape{3, 6, 5}}, Case{Shape{64, 128}, Shape{128, 96}}}) {
    const auto spec = spec_of("MatMul", {{DType::f32, c.a}, {DType::f32, c.b}});
    expect_matches_reference(spec, random_inputs(spec), "onednn", kGemmTol);
  }
}

TEST(OnednnGemm, MatchesReferenceForEveryAttributeCombination) {
  const int64_t m = 6, k = 5, n = 4;
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (const auto& [alpha, beta] :
           {std::pair{1.0, 1.0}, std::pair{0.5, 0.5}, std::pair{2.0, 0.25}, std::pair{1.5, 0.0}}) {
        const Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
        for (const Shape& c : {Shape{}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}, Shape{1}}) {
          const auto spec = spec_of("Gemm", {{DType::f32, a}, {DType::f32, b}, {DType::f32, c}},
                                    {{"transA", ta}, {"transB", tb}, {"alpha", alpha}, {"beta", beta}});
          expect_matches_reference(spec, random_inputs(spec), "onednn", kGemmTol);
        }
        const auto no_c = spec_of("Gemm", {{DType::f32, a}, {DType::f32, b}},
                                  {{"transA", ta}, {"transB", tb}, {"alpha", alpha}});
        expect_matches_reference(no_c, random_inputs(no_c), "onednn", kGemmTol);
      }
}

TEST(OnednnGemm, LinearLayerRunsTheBrgemmKernel) {
  // torch.nn.Linear exports Gemm(transB=1) with a bias row: the fast path, C as matmul's bias.
  const auto spec =
      spec_of("Gemm", {{DType::f32, Shape{32, 256}}, {DType::f32, Shape{128, 256}}, {DType::f32, Shape{128}}},
              {{"transB", int64_t{1}}});
  const auto impl = onednn_implementation(spec);
  EXPECT_NE(impl.find("brg"), std::string::npos) << impl;
}

}  // namespace d5::test
