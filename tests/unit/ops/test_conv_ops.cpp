// Conv and ConvTranspose against hand-computed values and against direct loops from the ONNX
// definitions (nn_test_util.h), over many attribute combinations, plus gradient checks.
#include "nn_test_util.h"

namespace d5::test {

namespace {

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;
  int64_t group = 1;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {};  // empty: attribute absent
  std::string auto_pad = "";                                     // empty: attribute absent
  bool bias = false;
  std::vector<int64_t> output_padding = {}, output_shape = {};  // ConvTranspose only
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

Attributes window_attrs(const ConvCase& c) {
  Attributes a;
  if (c.group != 1) a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.auto_pad.empty()) a.set("auto_pad", c.auto_pad);
  if (!c.output_padding.empty()) a.set("output_padding", c.output_padding);
  if (!c.output_shape.empty()) a.set("output_shape", c.output_shape);
  return a;
}

struct Problem {
  std::unique_ptr<Operator> op;
  std::vector<Tensor> inputs;
};

Problem make_problem(const std::string& type, const ConvCase& c, DType t) {
  const int64_t bias_len = type == "Conv" ? c.w[0] : c.w[1] * c.group;
  std::vector<TensorDesc> descs = {{t, Shape(c.x)}, {t, Shape(c.w)}};
  std::vector<Tensor> in = {random_tensor(t, Shape(c.x), c.name + "x"),
                            random_tensor(t, Shape(c.w), c.name + "w")};
  if (c.bias) {
    descs.push_back({t, Shape{bias_len}});
    in.push_back(random_tensor(t, Shape{bias_len}, c.name + "b"));
  }
  return {make_op(spec_of(type, descs, window_attrs(c))), std::move(in)};
}

Geometry conv_geometry(const ConvCase& c) {
  return window_geometry(spatial(Shape(c.x)), spatial(Shape(c.w)), c.strides, c.dilations, c.pads,
                         c.auto_pad);
}

// ConvTranspose geometry per ONNX: natural size s * (in - 1) + output_padding + (k - 1) * d + 1
// minus pads; with output_shape (or SAME_*: in * s) the cut-off total is split, the larger half at
// the beginning except for SAME_UPPER.
std::pair<Geometry, std::vector<int64_t>> transpose_geometry(const ConvCase& c) {
  const auto in = spatial(Shape(c.x)), k = spatial(Shape(c.w));
  const size_t r = in.size();
  Geometry g = window_geometry(in, k, c.strides, c.dilations, {}, "NOTSET");
  std::vector<int64_t> out(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t op = c.output_padding.empty() ? 0 : c.output_padding[d];
    const int64_t full = g.strides[d] * (in[d] - 1) + op + (k[d] - 1) * g.dilations[d] + 1;
    const bool same = c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER";
    if (!c.output_shape.empty() || same) {
      out[d] = c.output_shape.empty() ? in[d] * g.strides[d] : c.output_shape[d];
      const int64_t total = std::max<int64_t>(0, full - out[d]);
      g.pads_begin[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      const int64_t pb = c.pads.empty() ? 0 : c.pads[d], pe = c.pads.empty() ? 0 : c.pads[r + d];
      out[d] = full - pb - pe;
      g.pads_begin[d] = pb;
    }
  }
  return {g, out};
}

double tolerance(DType t) { return t == DType::f32 ? 2e-5 : 1e-12; }

// ---- Conv -------------------------------------------------------------------------------------

TEST(Conv, HandComputed2D) {
  // X = [[1 2 3], [4 5 6], [7 8 9]], 2x2 kernel of ones: each output is the sum of a 2x2 block,
  // [[1+2+4+5, 2+3+5+6], [4+5+7+8, 5+6+8+9]] = [[12, 16], [24, 28]], plus bias 0.5.
  const auto f = DType::f64;
  auto op = make_op(spec_of("Conv", {{f, Shape{1, 1, 3, 3}}, {f, Shape{1, 1, 2, 2}}, {f, Shape{1}}}));
  const std::vector<Tensor> in = {Tensor::from_values<double>(Shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                                  Tensor::from_values<double>(Shape{1, 1, 2, 2}, {1, 1, 1, 1}),
                                  Tensor::from_values<double>(Shape{1}, {0.5})};
  const auto y = op->run_forward(in)[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{12.5, 16.5, 24.5, 28.5}));
  EXPECT_DOUBLE_EQ(op->flops(), 2.0 * 4 * 4);  // 4 outputs x 4 taps x 1 channel
}

TEST(Conv, HandComputedStridedPaddedGroups) {
  // Two groups of one channel each, 1-D, kernel [1, -1] (a forward difference), stride 2, pad 1 at
  // the beginning: positions read (pad, x0), (x1, x2), (x3, x4) -> 0 - x0, x1 - x2, x3 - x4.
  const auto f = DType::f32;
  Attributes a{
      {"group", int64_t{2}}, {"strides", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{1, 0}}};
  auto op = make_op(spec_of("Conv", {{f, Shape{1, 2, 5}}, {f, Shape{2, 1, 2}}}, a));
  const std::vector<Tensor> in = {
      Tensor::from_values<float>(Shape{1, 2, 5}, {1, 2, 4, 8, 16, 10, 20, 30, 40, 50}),
      Tensor::from_values<float>(Shape{2, 1, 2}, {1, -1, 2, -2})};  // channel 1 doubled
  EXPECT_EQ(values(op->run_forward(in)[0]), (std::vector<double>{-1, -2, -8, -20, -20, -20}));
}

class ConvOracle : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvOracle, MatchesDirectLoops) {
  const ConvCase& c = GetParam();
  for (DType t : {DType::f32, DType::f64}) {
    auto p = make_problem("Conv", c, t);
    const Tensor y = p.op->run_forward(p.inputs)[0];
    const Tensor expected =
        naive_conv(p.inputs[0], p.inputs[1], c.bias ? &p.inputs[2] : nullptr, c.group, conv_geometry(c));
    expect_close(y, expected, tolerance(t), tolerance(t), c.name + " " + std::string(to_string(t)));
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Reference, ConvOracle,
    ::testing::Values(
        ConvCase{"pad1", {2, 3, 7, 6}, {4, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, "", true},
        ConvCase{"stride2_asym_pads", {1, 3, 9, 8}, {5, 3, 3, 2}, 1, {2, 2}, {}, {0, 1, 2, 1}},
        ConvCase{"dilation2", {2, 2, 9, 9}, {3, 2, 3, 3}, 1, {}, {2, 2}, {}},
        ConvCase{"dilation_stride_pad", {1, 2, 10, 11}, {3, 2, 2, 3}, 1, {2, 3}, {3, 2}, {2, 1, 0, 3}},
        ConvCase{"groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, 2, {}, {}, {1, 0, 1, 0}, "", true},
        ConvCase{"depthwise", {2, 5, 8, 7}, {5, 1, 3, 3}, 5, {}, {}, {1, 1, 1, 1}, "", true},
        ConvCase{"depthwise_multiplier", {1, 3, 6, 6}, {6, 1, 3, 3}, 3, {2, 1}, {}, {1, 1, 1, 1}},
        ConvCase{"same_upper_even_kernel", {1, 2, 7, 8}, {3, 2, 4, 4}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
        ConvCase{"same_lower_even_kernel", {1, 2, 7, 8}, {3, 2, 4, 4}, 1, {2, 2}, {}, {}, "SAME_LOWER"},
        ConvCase{"same_upper_dilated", {1, 2, 6, 5}, {2, 2, 3, 3}, 1, {1, 2}, {2, 1}, {}, "SAME_UPPER"},
        ConvCase{"valid_stride3", {1, 3, 10, 9}, {2, 3, 3, 2}, 1, {3, 3}, {}, {}, "VALID"},
        ConvCase{"conv1d", {2, 3, 11}, {4, 3, 5}, 1, {2}, {2}, {2, 1}, "", true},
        ConvCase{"conv1d_same_lower", {1, 2, 10}, {2, 2, 4}, 1, {3}, {}, {}, "SAME_LOWER"},
        ConvCase{"conv3d", {1, 2, 5, 6, 4}, {3, 2, 3, 2, 3}, 1, {1, 2, 1}, {}, {1, 0, 1, 1, 1, 0}, "", true},
        ConvCase{"conv3d_groups_dilated", {2, 4, 6, 5, 5}, {4, 2, 2, 2, 2}, 2, {}, {2, 1, 2}, {}},
        ConvCase{"pointwise_direct", {2, 6, 5, 5}, {4, 6, 1, 1}, 1, {}, {}, {}, "", true},
        ConvCase{"pointwise_groups", {1, 6, 4, 5}, {9, 2, 1, 1}, 3},
        ConvCase{"pointwise_strided", {1, 6, 5, 5}, {4, 6, 1, 1}, 1, {2, 2}},
        ConvCase{"pointwise_padded", {1, 2, 3, 3}, {2, 2, 1, 1}, 1, {}, {}, {1, 0, 0, 1}},
        // Shapes that cross the GEMM's blocking: M = 33 rows (not a multiple of the 6-row tile),
        // K = 360 > 256 (two K blocks), and P = 3600 > 3072 output columns (two N panels).
        ConvCase{"gemm_edges_m", {2, 16, 20, 20}, {33, 16, 3, 3}, 1, {}, {}, {1, 1, 1, 1}},
        ConvCase{"gemm_edges_k", {1, 40, 9, 9}, {10, 40, 3, 3}},
        ConvCase{"gemm_edges_n", {1, 2, 60, 60}, {3, 2, 3, 3}, 1, {}, {}, {1, 1, 1, 1}}),
    [](const auto& info) { return info.param.name; });
// clang-format on

// The two forward algorithms: the registry picks the batched one while its workspace fits the
// spec's limit, the per-image one otherwise; both must agree with the direct loops.
TEST(Conv, WorkspaceLimitChoosesTheAlgorithm) {
  const ConvCase c{"algorithms", {4, 3, 9, 9}, {5, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, "", true};
  auto p = make_problem("Conv", c, DType::f32);
  ASSERT_EQ(p.op->implementation(), "reference:batched-im2col");
  // K = 27 rows, M = 5, N * P = 4 * 81: (27 + 5) * 324 floats.
  EXPECT_EQ(p.op->workspace_bytes(), (27 + 5) * 4 * 81 * 4);
  const Tensor expected =
      naive_conv(p.inputs[0], p.inputs[1], &p.inputs[2], c.group, conv_geometry(c));
  expect_close(p.op->run_forward(p.inputs)[0], expected, 2e-5, 2e-5, "batched");

  OpSpec limited = p.op->spec();
  limited.workspace_limit = p.op->workspace_bytes() - 1;
  auto per_image = OpRegistry::global().create(limited, "reference");
  EXPECT_EQ(per_image->implementation(), "reference");
  EXPECT_LE(per_image->workspace_bytes(), limited.workspace_limit);
  expect_close(per_image->run_forward(p.inputs)[0], expected, 2e-5, 2e-5, "per image");
  const auto reasons = OpRegistry::global().explain(limited, "reference");
  ASSERT_FALSE(reasons.empty());
  EXPECT_NE(reasons[0].reason.find("over the limit"), std::string::npos) << reasons[0].reason;

  // Below even the per-image workspace, no algorithm fits: the refusal says so.
  limited.workspace_limit = 16;
  EXPECT_THROW(OpRegistry::global().create(limited, "reference"), Unimplemented);
}

TEST(Conv, KernelShapeAttributeMustMatchWeights) {
  const auto f = DType::f32;
  auto ok = make_op(spec_of("Conv", {{f, Shape{1, 1, 5, 5}}, {f, Shape{1, 1, 3, 2}}},
                            {{"kernel_shape", std::vector<int64_t>{3, 2}}}));
  EXPECT_EQ(ok->output_descs()[0].shape, (Shape{1, 1, 3, 4}));
  expect_invalid(spec_of("Conv", {{f, Shape{1, 1, 5, 5}}, {f, Shape{1, 1, 3, 2}}},
                         {{"kernel_shape", std::vector<int64_t>{3, 3}}}),
                 "kernel_shape");
}

TEST(Conv, RejectsBadShapesAndAttributes) {
  const auto f = DType::f32;
  const TensorDesc x{f, Shape{1, 4, 6, 6}}, w{f, Shape{2, 4, 3, 3}};
  expect_invalid(spec_of("Conv", {x, {f, Shape{2, 3, 3, 3}}}), "input channels");
  expect_invalid(spec_of("Conv", {x, w}, {{"group", int64_t{3}}}), "group 3");
  expect_invalid(spec_of("Conv", {x, {f, Shape{3, 2, 3, 3}}}, {{"group", int64_t{2}}}), "output channels");
  expect_invalid(spec_of("Conv", {x, w, {f, Shape{3}}}), "B [3]");
  expect_invalid(spec_of("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1}}}), "pads");
  expect_invalid(spec_of("Conv", {x, w}, {{"strides", std::vector<int64_t>{0, 1}}}), "strides");
  expect_invalid(spec_of("Conv", {x, w}, {{"auto_pad", std::string("SAME")}}), "auto_pad 'SAME'");
  expect_invalid(spec_of("Conv", {x, w},
                         {{"auto_pad", std::string("VALID")}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
                 "cannot be combined");
  expect_invalid(spec_of("Conv", {x, {f, Shape{2, 4, 7, 3}}}), "smaller than the dilated kernel");
  expect_invalid(spec_of("Conv", {{DType::i32, Shape{1, 4, 6, 6}}, {DType::i32, Shape{2, 4, 3, 3}}}),
                 "dtype i32");
  expect_invalid(spec_of("Conv", {x, {DType::f64, Shape{2, 4, 3, 3}}}), "input 1 is f64");
  expect_invalid(spec_of("Conv", {{f, Shape{4, 6}}, {f, Shape{2, 4}}}), "spatial axis");
}

TEST(Conv, Gradients) {
  // clang-format off
  const std::vector<ConvCase> cases = {
      {"g_pad_stride", {2, 3, 6, 5}, {4, 3, 3, 2}, 1, {2, 1}, {}, {1, 0, 1, 1}, "", true},
      {"g_groups_dilation", {1, 4, 7, 6}, {4, 2, 2, 2}, 2, {}, {2, 2}, {0, 1, 1, 0}},
      {"g_depthwise_same", {1, 3, 5, 5}, {3, 1, 3, 3}, 3, {2, 2}, {}, {}, "SAME_LOWER", true},
      {"g_1d", {2, 2, 9}, {3, 2, 3}, 1, {2}, {}, {1, 2}, "", true},
      {"g_3d", {1, 2, 4, 4, 3}, {2, 2, 2, 3, 2}, 1, {1, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"g_pointwise", {2, 4, 3, 3}, {3, 4, 1, 1}, 1, {}, {}, {}, "", true},
  };
  // clang-format on
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = make_problem("Conv", c, DType::f64);
    expect_gradient_ok(*p.op, p.inputs);
  }
}

TEST(Conv, UndefinedOutputGradientGivesZeros) {
  auto p = make_problem("Conv", {"zero", {1, 2, 4, 4}, {2, 2, 3, 3}, 1, {}, {}, {}, "", true}, DType::f64);
  const auto y = p.op->run_forward(p.inputs);
  const std::vector<Tensor> gy = {Tensor()};
  for (const auto& g : p.op->run_backward(gy, p.inputs, y))
    for (double v : values(g)) EXPECT_EQ(v, 0.0);
}

// ---- ConvTranspose ----------------------------------------------------------------------------

TEST(ConvTranspose, HandComputed) {
  // Each input pixel stamps its value times the 2x2 kernel of ones onto the 3x3 output:
  // [[1, 1+2, 2], [1+3, 1+2+3+4, 2+4], [3, 3+4, 4]] = [[1, 3, 2], [4, 10, 6], [3, 7, 4]], + bias 1.
  const auto f = DType::f64;
  auto op =
      make_op(spec_of("ConvTranspose", {{f, Shape{1, 1, 2, 2}}, {f, Shape{1, 1, 2, 2}}, {f, Shape{1}}}));
  const std::vector<Tensor> in = {Tensor::from_values<double>(Shape{1, 1, 2, 2}, {1, 2, 3, 4}),
                                  Tensor::from_values<double>(Shape{1, 1, 2, 2}, {1, 1, 1, 1}),
                                  Tensor::from_values<double>(Shape{1}, {1})};
  EXPECT_EQ(values(op->run_forward(in)[0]), (std::vector<double>{2, 4, 3, 5, 11, 7, 4, 8, 5}));
}

TEST(ConvTranspose, HandComputedStrideAndOutputPadding) {
  // 1-D, stride 2, kernel [1, 10]: x0 lands on 0 and 1, x1 on 2 and 3; output_padding adds one
  // more (zero) pixel: [1, 10, 2, 20, 0].
  const auto f = DType::f32;
  Attributes a{{"strides", std::vector<int64_t>{2}}, {"output_padding", std::vector<int64_t>{1}}};
  auto op = make_op(spec_of("ConvTranspose", {{f, Shape{1, 1, 2}}, {f, Shape{1, 1, 2}}}, a));
  const std::vector<Tensor> in = {Tensor::from_values<float>(Shape{1, 1, 2}, {1, 2}),
                                  Tensor::from_values<float>(Shape{1, 1, 2}, {1, 10})};
  const auto y = op->run_forward(in)[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 5}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 10, 2, 20, 0}));
}

class ConvTransposeOracle : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTransposeOracle, MatchesDirectLoops) {
  const ConvCase& c = GetParam();
  const auto [g, out] = transpose_geometry(c);
  for (DType t : {DType::f32, DType::f64}) {
    auto p = make_problem("ConvTranspose", c, t);
    const Tensor y = p.op->run_forward(p.inputs)[0];
    const Tensor expected =
        naive_conv_transpose(p.inputs[0], p.inputs[1], c.bias ? &p.inputs[2] : nullptr, c.group, g, out);
    expect_close(y, expected, tolerance(t), tolerance(t), c.name + " " + std::string(to_string(t)));
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Reference, ConvTransposeOracle,
    ::testing::Values(
        ConvCase{"basic", {2, 3, 4, 5}, {3, 2, 3, 3}, 1, {}, {}, {}, "", true},
        ConvCase{"stride2_pads_outpad", {1, 2, 4, 3}, {2, 3, 3, 3}, 1, {2, 2}, {}, {1, 0, 1, 1}, "", false,
                 {1, 0}},
        ConvCase{"groups_dilation", {2, 4, 3, 4}, {4, 2, 2, 3}, 2, {1, 2}, {2, 1}, {0, 1, 1, 0}, "", true},
        ConvCase{"depthwise", {1, 3, 5, 5}, {3, 1, 3, 3}, 3, {2, 2}, {}, {1, 1, 1, 1}},
        ConvCase{"output_shape", {1, 2, 3, 3}, {2, 2, 3, 3}, 1, {2, 2}, {}, {}, "", false, {}, {6, 5}},
        ConvCase{"output_shape_same_upper", {1, 2, 3, 4}, {2, 2, 3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER", false,
                 {}, {5, 8}},
        ConvCase{"same_upper", {1, 2, 3, 4}, {2, 2, 4, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER", true},
        ConvCase{"same_lower", {1, 2, 3, 4}, {2, 2, 4, 3}, 1, {2, 2}, {}, {}, "SAME_LOWER"},
        ConvCase{"conv1d", {2, 3, 6}, {3, 2, 4}, 1, {3}, {2}, {2, 1}, "", true, {2}},
        ConvCase{"conv3d", {1, 2, 3, 2, 3}, {2, 2, 2, 3, 2}, 1, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}, "", true},
        ConvCase{"pointwise_direct", {2, 5, 4, 3}, {5, 3, 1, 1}, 1, {}, {}, {}, "", true},
        ConvCase{"pointwise_strided", {1, 4, 3, 3}, {4, 2, 1, 1}, 1, {2, 2}}),
    [](const auto& info) { return info.param.name; });
// clang-format on

TEST(ConvTranspose, IsTheAdjointOfConv) {
  // <Conv(x), y> == <x, ConvTranspose(y)> for the same weights and window.
  const auto f = DType::f64;
  Attributes a{{"strides", std::vector<int64_t>{2, 1}},
               {"pads", std::vector<int64_t>{1, 0, 1, 1}},
               {"dilations", std::vector<int64_t>{1, 2}},
               {"group", int64_t{2}}};
  auto conv = make_op(spec_of("Conv", {{f, Shape{1, 4, 7, 6}}, {f, Shape{6, 2, 3, 2}}}, a));
  const Shape ys = conv->output_descs()[0].shape;  // [1, 6, 4, 5]
  Attributes at = a;
  at.set("output_padding", std::vector<int64_t>{0, 0});
  auto convt = make_op(spec_of("ConvTranspose", {{f, ys}, {f, Shape{6, 2, 3, 2}}}, at));
  // ConvTranspose's W is [C_in_of_transpose = 6, M/group = 2, ...]: the same tensor as Conv's W
  // read the other way round, which is exactly the adjoint pairing.
  const Tensor x = random_tensor(f, Shape{1, 4, 7, 6}, "ax"), w = random_tensor(f, Shape{6, 2, 3, 2}, "aw");
  const Tensor y = random_tensor(f, ys, "ay");
  const Tensor cx = conv->run_forward(std::vector<Tensor>{x, w})[0];
  const Tensor ty = convt->run_forward(std::vector<Tensor>{y, w})[0];
  ASSERT_EQ(ty.shape(), x.shape());
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < y.numel(); ++i) lhs += cx.get(i) * y.get(i);
  for (int64_t i = 0; i < x.numel(); ++i) rhs += x.get(i) * ty.get(i);
  EXPECT_NEAR(lhs, rhs, 1e-10 * std::max(1.0, std::abs(lhs)));
}

TEST(ConvTranspose, RejectsBadShapesAndAttributes) {
  const auto f = DType::f32;
  const TensorDesc x{f, Shape{1, 4, 3, 3}};
  expect_invalid(spec_of("ConvTranspose", {x, {f, Shape{3, 2, 3, 3}}}), "C = 4");
  expect_invalid(spec_of("ConvTranspose", {x, {f, Shape{4, 2, 3, 3}}, {f, Shape{4}}}), "B [4]");
  expect_invalid(
      spec_of("ConvTranspose", {x, {f, Shape{4, 2, 3, 3}}}, {{"output_padding", std::vector<int64_t>{1}}}),
      "output_padding");
  expect_invalid(
      spec_of("ConvTranspose", {x, {f, Shape{4, 2, 3, 3}}}, {{"output_shape", std::vector<int64_t>{5}}}),
      "output_shape");
  expect_invalid(
      spec_of("ConvTranspose", {x, {f, Shape{4, 2, 2, 2}}}, {{"pads", std::vector<int64_t>{3, 0, 2, 0}}}),
      "remove more than the whole output");
}

TEST(ConvTranspose, Gradients) {
  // clang-format off
  const std::vector<ConvCase> cases = {
      {"g_stride_pad_outpad", {2, 2, 3, 3}, {2, 3, 3, 2}, 1, {2, 2}, {}, {1, 0, 0, 1}, "", true, {1, 1}},
      {"g_groups_dilation", {1, 4, 3, 4}, {4, 1, 2, 2}, 2, {1, 2}, {2, 1}, {}},
      {"g_1d_same", {2, 2, 5}, {2, 2, 3}, 1, {2}, {}, {}, "SAME_UPPER", true},
      {"g_3d", {1, 2, 2, 3, 2}, {2, 1, 2, 2, 2}, 1, {2, 1, 1}, {}, {}, "", true},
      {"g_pointwise", {2, 3, 3, 2}, {3, 2, 1, 1}, 1, {}, {}, {}, "", true},
  };
  // clang-format on
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = make_problem("ConvTranspose", c, DType::f64);
    expect_gradient_ok(*p.op, p.inputs);
  }
}

}  // namespace

}  // namespace d5::test
