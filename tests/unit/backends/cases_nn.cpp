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
// Sums of K = 576 products (64 channels, 3x3) on results up to ~30: oneDNN may pick Winograd
// there (convolution_auto), whose transforms lose about 1e-4 relative.
const Tolerance kWinogradF32{1e-3, 1e-4};
// Pooling computes each output from one window: max is exact, average differs by a rounding or
// two.
const Tolerance kPoolF32{1e-5, 1e-6};

void check_conv(const std::string& type, DType t, const Shape& x, const Shape& w, bool bias, Attributes a,
                Tolerance f32_tol = kConvF32) {
  std::vector<Tensor> in = {random_input({t, x}, "x"), random_input({t, w}, "w")};
  if (bias) in.push_back(random_input({t, Shape{type == "Conv" ? w[0] : w[1] * a.get_int("group", 1)}}, "b"));
  check(type, in, std::move(a), t == DType::f32 ? std::optional<Tolerance>(f32_tol) : std::nullopt);
}

// MaxPool asked for Y alone: the form every backend runs (oneDNN has no Indices output).
void check_max_pool_y(const Shape& x, const Attributes& a) {
  OpSpec s = spec_of("MaxPool", {{DType::f32, x}}, a);
  s.num_outputs = 1;
  check_spec(s, random_inputs({{DType::f32, x}}), kPoolF32);
}

// Pooling windows beyond those of the 7x6 image below: dilations, 1-D and 3-D, SAME_UPPER on an
// even image, and a larger image with more channels.
std::vector<std::pair<Shape, Attributes>> pool_windows() {
  return {
      {{2, 3, 9, 9}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 8, 8}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}},
      {{1, 2, 7, 7}, {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}},
      {{1, 2, 6, 7}, {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{1, 2}}, {"pads", Ints{0, 1, 1, 0}}}},
      {{2, 3, 10}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}}},
      {{1, 2, 5, 5, 5}, {{"kernel_shape", Ints{2, 2, 2}}}},
      {{1, 1, 8, 8}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {{4, 16, 14, 14}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      // ceil_mode whose last window stays inside the pads (count_include_pad agrees with ONNX).
      {{1, 2, 9, 9},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}},
  };
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
    check_conv("Conv", t, {1, 4, 9, 8}, {6, 4, 3, 2}, true, {{"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}});
    check_conv("Conv", t, {2, 6, 8, 8}, {9, 2, 3, 3}, false, {{"group", int64_t{3}}});
    check_conv("Conv", t, {1, 8, 6, 6}, {8, 1, 3, 3}, true, {{"group", int64_t{8}}, {"pads", Ints{1, 1, 1, 1}}});
    check_conv("Conv", t, {1, 3, 10, 10}, {5, 3, 3, 3}, true, {{"dilations", Ints{2, 3}}, {"pads", Ints{2, 2, 2, 2}}});
    check_conv("Conv", t, {2, 3, 11}, {4, 3, 3}, true, {{"strides", Ints{2}}});                          // 1-D
    check_conv("Conv", t, {1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1, 1, 1}}});  // 3-D
    check_conv("Conv", t, {2, 16, 5, 5}, {8, 16, 1, 1}, true, {});                                      // 1x1
  }
  check_conv("Conv", DType::f32, {2, 64, 14, 14}, {64, 64, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}, kWinogradF32);
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
    check_conv("ConvTranspose", t, {1, 3, 4, 4}, {3, 2, 3, 3}, true,
               {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}});
    check_conv("ConvTranspose", t, {2, 4, 5, 5}, {4, 3, 3, 3}, true, {{"group", int64_t{2}}});
    check_conv("ConvTranspose", t, {1, 2, 3, 3}, {2, 3, 3, 3}, false,
               {{"strides", Ints{2, 2}}, {"output_shape", Ints{6, 6}}});
    check_conv("ConvTranspose", t, {1, 2, 5, 5}, {2, 2, 3, 3}, true,
               {{"dilations", Ints{2, 2}}, {"pads", Ints{1, 0, 2, 1}}});
    check_conv("ConvTranspose", t, {2, 3, 6}, {3, 4, 3}, true, {{"strides", Ints{3}}, {"pads", Ints{1, 2}}});
    check_conv("ConvTranspose", t, {1, 2, 3, 3, 3}, {2, 2, 2, 2, 2}, true, {{"strides", Ints{2, 2, 2}}});
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
                                                                   {{2, 1, 3, 4}, {5, 4, 2}},
                                                                   {{2, 5, 7}, {2, 7, 3}},
                                                                   {{7}, {2, 7, 3}},
                                                                   {{3, 5, 7}, {7}},
                                                                   {{1, 4, 6}, {3, 6, 5}},
                                                                   {{64, 128}, {128, 96}}})
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

TEST(Nn, GemmEveryAttributeCombination) {
  // Both transposes, alpha and beta (beta 0 included), and every broadcastable C, or none.
  const int64_t m = 6, k = 5, n = 4;
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (const auto& [alpha, beta] :
           {std::pair{1.0, 1.0}, std::pair{0.5, 0.5}, std::pair{2.0, 0.25}, std::pair{1.5, 0.0}}) {
        const Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
        const Attributes attrs = {{"transA", ta}, {"transB", tb}, {"alpha", alpha}, {"beta", beta}};
        for (const Shape& c : {Shape{}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}, Shape{1}})
          check("Gemm", random_inputs({{DType::f32, a}, {DType::f32, b}, {DType::f32, c}}), attrs);
        check("Gemm", random_inputs({{DType::f32, a}, {DType::f32, b}}), attrs);
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
  // Nodes asking for Y alone: one output (expect_matches_reference compares the output counts).
  for (const auto& a : attrs) check_max_pool_y({2, 3, 7, 6}, a);
  for (const auto& [x, a] : pool_windows()) check_max_pool_y(x, a);
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
    for (auto [x, a] : pool_windows()) {
      a.set("count_include_pad", include);
      check("AveragePool", random_inputs({{DType::f32, x}}), a, kPoolF32);
    }
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
  for (const char* type : {"GlobalAveragePool", "GlobalMaxPool"}) {
    check(type, random_inputs({{DType::f32, {2, 3, 5, 7}}}), {}, kPoolF32);
    check(type, random_inputs({{DType::f32, {1, 2, 3, 3, 3}}}), {}, kPoolF32);
  }
}

// DFT and STFT: direct sums in double (reference) against FFTs; f32 results differ by rounding
// that grows with the transform length.
TEST(Nn, SpectralTransforms) {
  const auto known = [](const std::string& type, const std::vector<Tensor>& in, Attributes attrs,
                        std::optional<Tolerance> tol, int opset = 17) {
    std::vector<TensorDesc> d;
    std::vector<std::optional<Tensor>> values;
    std::vector<bool> present;
    for (size_t i = 0; i < in.size(); ++i) {
      d.push_back(in[i].defined() ? in[i].desc() : TensorDesc{});
      values.push_back(i > 0 && in[i].defined() ? std::optional<Tensor>(in[i]) : std::nullopt);
      present.push_back(in[i].defined());
    }
    OpSpec s = spec_of(type, d, std::move(attrs), values);
    s.present = present;
    s.opset = opset;
    check_spec(s, in, tol);
  };
  const auto n = [](int64_t v) { return Tensor::from_values<int64_t>(Shape{}, {v}); };
  const Tolerance f32{1e-4, 1e-4};
  for (DType t : {DType::f32, DType::f64}) {
    const std::optional<Tolerance> tol = t == DType::f32 ? std::optional<Tolerance>(f32) : std::nullopt;
    const auto real = random_input({t, Shape{2, 6, 3, 1}}, "x");
    const auto cplx = random_input({t, Shape{2, 5, 2}}, "z");
    known("DFT", {real}, {}, tol);
    known("DFT", {real}, {{"axis", int64_t{2}}, {"onesided", int64_t{1}}}, tol);
    known("DFT", {real, n(8)}, {}, tol);
    known("DFT", {real, n(4)}, {{"onesided", int64_t{1}}}, tol);
    known("DFT", {cplx}, {{"inverse", int64_t{1}}}, tol);
    known("DFT", {real, Tensor(), n(2)}, {}, tol, 20);  // opset 20: the axis is input 2
    known("DFT", {real, n(4), n(-3)}, {{"onesided", int64_t{1}}}, tol, 20);
    const auto signal = random_input({t, Shape{2, 20, 1}}, "s");
    const auto window = random_input({t, Shape{6}}, "w", 0, 1);
    known("STFT", {signal, n(3), window}, {}, tol);
    known("STFT", {signal, n(4), Tensor(), n(8)}, {{"onesided", int64_t{0}}}, tol);
    known("STFT", {random_input({t, Shape{1, 11, 2}}, "c"), n(2), window}, {{"onesided", int64_t{0}}}, tol);
  }
}

}  // namespace d5::test
