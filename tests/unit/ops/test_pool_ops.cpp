// MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool against hand-computed values and direct
// loops from the ONNX definitions, plus gradient checks.
#include "nn_test_util.h"

namespace d5::test {

namespace {

struct PoolCase {
  std::string name;
  std::vector<int64_t> x, kernel;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {};  // empty: attribute absent
  std::string auto_pad = "";
  bool ceil_mode = false;
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

Attributes pool_attrs(const PoolCase& c) {
  Attributes a{{"kernel_shape", c.kernel}};
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.auto_pad.empty()) a.set("auto_pad", c.auto_pad);
  if (c.ceil_mode) a.set("ceil_mode", int64_t{1});
  return a;
}

// The end pads the oracle needs for count_include_pad (SAME_* puts the remainder at the end).
std::vector<int64_t> end_pads(const PoolCase& c, const Geometry& g) {
  const auto in = spatial(Shape(c.x));
  std::vector<int64_t> e(in.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) {
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER")
      e[d] = std::max<int64_t>(
                 0, (g.out[d] - 1) * g.strides[d] + (g.kernel[d] - 1) * g.dilations[d] + 1 - in[d]) -
             g.pads_begin[d];
    else if (!c.pads.empty())
      e[d] = c.pads[in.size() + d];
  }
  return e;
}

Geometry pool_geometry(const PoolCase& c) {
  return window_geometry(spatial(Shape(c.x)), c.kernel, c.strides, c.dilations, c.pads, c.auto_pad,
                         c.ceil_mode);
}

// clang-format off
const std::vector<PoolCase> kPoolCases = {
    {"k2s2", {2, 3, 6, 6}, {2, 2}, {2, 2}},
    {"k3_pad1", {1, 2, 7, 6}, {3, 3}, {}, {}, {1, 1, 1, 1}},
    {"k3x2_s2_asym_pads", {1, 2, 9, 8}, {3, 2}, {2, 2}, {}, {1, 0, 0, 1}},
    {"dilated", {1, 2, 9, 9}, {2, 3}, {1, 2}, {2, 2}, {1, 1, 0, 2}},
    {"ceil_partial_window", {1, 1, 6, 7}, {3, 3}, {2, 2}, {}, {}, "", true},
    {"ceil_drops_window_in_end_pad", {1, 1, 5, 5}, {2, 2}, {2, 2}, {}, {1, 1, 1, 1}, "", true},
    // Odd total padding on both axes, so SAME_UPPER and SAME_LOWER differ.
    {"same_upper", {1, 2, 7, 6}, {2, 3}, {2, 2}, {}, {}, "SAME_UPPER"},
    {"same_lower", {1, 2, 7, 6}, {2, 3}, {2, 2}, {}, {}, "SAME_LOWER"},
    {"valid", {1, 1, 7, 7}, {3, 3}, {2, 2}, {}, {}, "VALID"},
    {"pool1d", {2, 3, 10}, {3}, {2}, {}, {1, 1}},
    {"pool3d", {1, 2, 5, 4, 6}, {2, 2, 3}, {2, 1, 2}, {}, {0, 1, 1, 0, 0, 1}},
    {"planes_in_parallel", {2, 16, 64, 64}, {3, 3}, {}, {}, {1, 1, 1, 1}},  // > 2^20 taps: OpenMP
};
// clang-format on

class PoolOracle : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolOracle, MaxPoolMatchesDirectLoops) {
  const PoolCase& c = GetParam();
  const Geometry g = pool_geometry(c);
  for (DType t : {DType::f32, DType::f64}) {
    auto op = make_op(spec_of("MaxPool", {{t, Shape(c.x)}}, pool_attrs(c)));
    const Tensor x = random_tensor(t, Shape(c.x), c.name);
    const auto out = op->run_forward(std::vector<Tensor>{x});
    const auto expected = naive_pool(x, g, end_pads(c, g), true, false);
    expect_close(out[0], expected.y, 0, 0, c.name);
    EXPECT_EQ(values(out[1]), values(expected.indices)) << c.name;
  }
}

TEST_P(PoolOracle, AveragePoolMatchesDirectLoops) {
  const PoolCase& c = GetParam();
  const Geometry g = pool_geometry(c);
  for (bool include_pad : {false, true})
    for (DType t : {DType::f32, DType::f64}) {
      Attributes a = pool_attrs(c);
      a.set("count_include_pad", int64_t{include_pad});
      auto op = make_op(spec_of("AveragePool", {{t, Shape(c.x)}}, a));
      const Tensor x = random_tensor(t, Shape(c.x), c.name);
      const auto expected = naive_pool(x, g, end_pads(c, g), false, include_pad);
      const double tol = t == DType::f32 ? 1e-6 : 1e-14;
      expect_close(op->run_forward(std::vector<Tensor>{x})[0], expected.y, tol, tol,
                   c.name + (include_pad ? " count_include_pad" : ""));
    }
}

INSTANTIATE_TEST_SUITE_P(Reference, PoolOracle, ::testing::ValuesIn(kPoolCases),
                         [](const auto& info) { return info.param.name; });

// ---- MaxPool ----------------------------------------------------------------------------------

TEST(MaxPool, HandComputedWithIndices) {
  // X = 0..15 in a 4x4 grid; 2x2 windows, stride 2: the bottom-right of each block,
  // 5, 7, 13, 15, which are also the flat indices.
  const auto f = DType::f32;
  auto op = make_op(
      spec_of("MaxPool", {{f, Shape{1, 1, 4, 4}}},
              {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}));
  Tensor x(f, Shape{1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) x.set(i, static_cast<double>(i));
  const auto out = op->run_forward(std::vector<Tensor>{x});
  EXPECT_EQ(values(out[0]), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(out[1].dtype(), DType::i64);
  EXPECT_EQ(values(out[1]), (std::vector<double>{5, 7, 13, 15}));
}

TEST(MaxPool, NodeAskingForYAloneGetsNoIndices) {
  // The grid of HandComputedWithIndices; a node with one output (num_outputs 1) has no Indices
  // output to fill, and its gradient still reaches the maxima.
  const auto f = DType::f64;
  OpSpec s = spec_of("MaxPool", {{f, Shape{1, 1, 4, 4}}},
                     {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  s.num_outputs = 1;
  auto op = make_op(s);
  ASSERT_EQ(op->output_descs().size(), 1u);
  Tensor x(f, Shape{1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) x.set(i, static_cast<double>(i));
  const auto out = op->run_forward(std::vector<Tensor>{x});
  EXPECT_EQ(values(out[0]), (std::vector<double>{5, 7, 13, 15}));
  const std::vector<Tensor> gy = {Tensor::from_values<double>(Shape{1, 1, 2, 2}, {1, 2, 3, 4})};
  std::vector<double> expect(16, 0.0);
  expect[5] = 1, expect[7] = 2, expect[13] = 3, expect[15] = 4;
  EXPECT_EQ(values(op->run_backward(gy, std::vector<Tensor>{x}, out)[0]), expect);
  s.num_outputs = 2;
  EXPECT_EQ(make_op(s)->output_descs().size(), 2u);
}

TEST(MaxPool, ColumnMajorIndicesWithStorageOrder) {
  // Two channels of [[1, 5, 2], [4, 3, 6]] (the second negated), 2x2 windows, stride 1.
  // Channel 0 maxima: 5 at (0, 1) and 6 at (1, 2); column-major (h + w * H): 2 and 5.
  // Channel 1 maxima: -1 at (0, 0) and -2 at (0, 2): 0 and 4, plus the plane offset 6.
  const auto f = DType::f64;
  auto op = make_op(spec_of("MaxPool", {{f, Shape{1, 2, 2, 3}}},
                            {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"storage_order", int64_t{1}}}));
  const Tensor x = Tensor::from_values<double>(Shape{1, 2, 2, 3}, {1, 5, 2, 4, 3, 6, -1, -5, -2, -4, -3, -6});
  const auto out = op->run_forward(std::vector<Tensor>{x});
  EXPECT_EQ(values(out[0]), (std::vector<double>{5, 6, -1, -2}));
  EXPECT_EQ(values(out[1]), (std::vector<double>{2, 5, 6, 10}));
}

TEST(MaxPool, TiesGoToTheFirstIndexForwardAndBackward) {
  // All values equal: each 2x2 window picks its first tap, (0, 0) and (0, 2); the gradient
  // follows it.
  const auto f = DType::f64;
  auto op = make_op(
      spec_of("MaxPool", {{f, Shape{1, 1, 2, 4}}},
              {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}));
  Tensor x(f, Shape{1, 1, 2, 4});
  x.fill(3.0);
  const auto out = op->run_forward(std::vector<Tensor>{x});
  EXPECT_EQ(values(out[1]), (std::vector<double>{0, 2}));
  const std::vector<Tensor> gy = {Tensor::from_values<double>(Shape{1, 1, 1, 2}, {10, 20}), Tensor()};
  EXPECT_EQ(values(op->run_backward(gy, std::vector<Tensor>{x}, out)[0]),
            (std::vector<double>{10, 0, 20, 0, 0, 0, 0, 0}));
}

TEST(MaxPool, IntegersNaNAndOptionalIndices) {
  // int8: max of [[-7, 3], [100, -128]] is 100.
  auto op8 = make_op(
      spec_of("MaxPool", {{DType::i8, Shape{1, 1, 2, 2}}}, {{"kernel_shape", std::vector<int64_t>{2, 2}}}));
  EXPECT_EQ(values(op8->run_forward(
                std::vector<Tensor>{Tensor::from_values<int8_t>(Shape{1, 1, 2, 2}, {-7, 3, 100, -128})})[0]),
            (std::vector<double>{100}));
  EXPECT_FALSE(op8->has_gradient());
  // A NaN in the window wins (PyTorch's choice), so it is not silently dropped.
  const auto f = DType::f32;
  auto op =
      make_op(spec_of("MaxPool", {{f, Shape{1, 1, 1, 3}}}, {{"kernel_shape", std::vector<int64_t>{1, 3}}}));
  const std::vector<Tensor> in = {Tensor::from_values<float>(Shape{1, 1, 1, 3}, {1, NAN, 2})};
  // Only Y requested: the op must not need the Indices output.
  std::vector<Tensor> outs = {Tensor(op->output_descs()[0])};
  op->forward(in, outs);
  EXPECT_TRUE(std::isnan(outs[0].get(0)));
}

TEST(MaxPool, Gradients) {
  // clang-format off
  const std::vector<PoolCase> cases = {
      {"g_pad_stride", {2, 2, 5, 6}, {3, 2}, {2, 2}, {}, {1, 0, 1, 1}},
      {"g_dilated_ceil", {1, 2, 6, 7}, {2, 2}, {2, 2}, {2, 1}, {}, "", true},
      {"g_1d_same", {2, 2, 9}, {3}, {2}, {}, {}, "SAME_UPPER"},
      {"g_3d", {1, 1, 4, 3, 4}, {2, 2, 2}, {1, 1, 2}, {}, {0, 1, 0, 1, 0, 0}},
  };
  // clang-format on
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto op = make_op(spec_of("MaxPool", {{DType::f64, Shape(c.x)}}, pool_attrs(c)));
    expect_gradient_ok(*op, {random_tensor(DType::f64, Shape(c.x), c.name)});
  }
}

// ---- AveragePool ------------------------------------------------------------------------------

TEST(AveragePool, HandComputedPadding) {
  // X = [[1, 2], [3, 4]], 2x2 windows, stride 1, one pixel of padding at the top and left.
  // Windows: {1}, {1, 2}, {1, 3}, {1, 2, 3, 4}. Excluding padding: [1, 1.5, 2, 2.5]; counting
  // it, every window divides by 4: [0.25, 0.75, 1, 2.5].
  const auto f = DType::f64;
  const Tensor x = Tensor::from_values<double>(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  for (int64_t include : {0, 1}) {
    auto op = make_op(spec_of("AveragePool", {{f, Shape{1, 1, 2, 2}}},
                              {{"kernel_shape", std::vector<int64_t>{2, 2}},
                               {"pads", std::vector<int64_t>{1, 1, 0, 0}},
                               {"count_include_pad", include}}));
    EXPECT_EQ(values(op->run_forward(std::vector<Tensor>{x})[0]),
              include ? (std::vector<double>{0.25, 0.75, 1, 2.5}) : (std::vector<double>{1, 1.5, 2, 2.5}));
  }
}

TEST(AveragePool, CeilModeWindowPastThePaddingIsClipped) {
  // Width 5, kernel 3, stride 3, ceil_mode: windows [0, 3) and [3, 6). Without padding the second
  // reaches past the input: both modes divide by the 2 real pixels, (4 + 5) / 2 = 4.5. With one
  // pixel of end padding, count_include_pad counts it: (4 + 5) / 3 = 3.
  const auto f = DType::f64;
  const Tensor x = Tensor::from_values<double>(Shape{1, 1, 5}, {1, 2, 3, 4, 5});
  auto run = [&](std::vector<int64_t> pads, int64_t include) {
    auto op = make_op(spec_of("AveragePool", {{f, Shape{1, 1, 5}}},
                              {{"kernel_shape", std::vector<int64_t>{3}},
                               {"strides", std::vector<int64_t>{3}},
                               {"ceil_mode", int64_t{1}},
                               {"pads", pads},
                               {"count_include_pad", include}}));
    return values(op->run_forward(std::vector<Tensor>{x})[0]);
  };
  EXPECT_EQ(run({0, 0}, 0), (std::vector<double>{2, 4.5}));
  EXPECT_EQ(run({0, 0}, 1), (std::vector<double>{2, 4.5}));
  EXPECT_EQ(run({0, 1}, 0), (std::vector<double>{2, 4.5}));
  EXPECT_EQ(run({0, 1}, 1), (std::vector<double>{2, 3}));
}

TEST(AveragePool, Gradients) {
  // clang-format off
  const std::vector<PoolCase> cases = {
      {"g_pad_stride", {2, 2, 5, 6}, {3, 2}, {2, 2}, {}, {1, 0, 1, 1}},
      {"g_ceil", {1, 2, 6, 7}, {3, 3}, {2, 2}, {}, {}, "", true},
      {"g_1d_same_lower", {2, 1, 9}, {4}, {2}, {}, {}, "SAME_LOWER"},
      {"g_3d_dilated", {1, 1, 5, 4, 4}, {2, 2, 2}, {1, 2, 1}, {2, 1, 1}},
  };
  // clang-format on
  for (const auto& c : cases)
    for (int64_t include : {0, 1}) {
      SCOPED_TRACE(c.name + (include ? " count_include_pad" : ""));
      Attributes a = pool_attrs(c);
      a.set("count_include_pad", include);
      auto op = make_op(spec_of("AveragePool", {{DType::f64, Shape(c.x)}}, a));
      expect_gradient_ok(*op, {random_tensor(DType::f64, Shape(c.x), c.name)});
    }
}

// ---- Global pools -----------------------------------------------------------------------------

TEST(GlobalPool, HandComputed) {
  // Channel 0 = [1, 2, 3, 4]: mean 2.5, max 4. Channel 1 = [-1, -2, -3, -8]: mean -3.5, max -1.
  const auto f = DType::f64;
  const Tensor x = Tensor::from_values<double>(Shape{1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -8});
  auto avg = make_op(spec_of("GlobalAveragePool", {{f, Shape{1, 2, 2, 2}}}));
  auto max = make_op(spec_of("GlobalMaxPool", {{f, Shape{1, 2, 2, 2}}}));
  EXPECT_EQ(avg->output_descs()[0].shape, (Shape{1, 2, 1, 1}));
  EXPECT_EQ(values(avg->run_forward(std::vector<Tensor>{x})[0]), (std::vector<double>{2.5, -3.5}));
  EXPECT_EQ(values(max->run_forward(std::vector<Tensor>{x})[0]), (std::vector<double>{4, -1}));
  EXPECT_EQ(max->output_descs().size(), 1u);
}

TEST(GlobalPool, MatchesDirectLoopsAndGradients) {
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{2, 3, 7}, std::vector<int64_t>{1, 2, 3, 4, 5}}) {
    const std::vector<int64_t> in(dims.begin() + 2, dims.end());
    const Geometry g = window_geometry(in, in, {}, {}, {}, "NOTSET");
    const Tensor x = random_tensor(DType::f64, Shape(dims), "global");
    for (bool max : {false, true}) {
      auto op = make_op(spec_of(max ? "GlobalMaxPool" : "GlobalAveragePool", {{DType::f64, Shape(dims)}}));
      expect_close(op->run_forward(std::vector<Tensor>{x})[0],
                   naive_pool(x, g, std::vector<int64_t>(in.size(), 0), max, false).y, 1e-14, 1e-14);
      expect_gradient_ok(*op, {x});
    }
  }
}

// ---- Errors -----------------------------------------------------------------------------------

TEST(Pool, RejectsBadShapesAndAttributes) {
  const auto f = DType::f32;
  const TensorDesc x{f, Shape{1, 1, 4, 4}};
  const Attributes k2{{"kernel_shape", std::vector<int64_t>{2, 2}}};
  expect_invalid(spec_of("MaxPool", {x}), "'kernel_shape' is required");
  expect_invalid(spec_of("AveragePool", {x}, {{"kernel_shape", std::vector<int64_t>{2}}}),
                 "kernel_shape [2]");
  Attributes all_pad = k2;
  all_pad.set("pads", std::vector<int64_t>{2, 2, 2, 2});
  expect_invalid(spec_of("MaxPool", {x}, all_pad), "entirely in the padding");
  Attributes order = k2;
  order.set("storage_order", int64_t{2});
  expect_invalid(spec_of("MaxPool", {x}, order), "storage_order 2");
  expect_invalid(spec_of("AveragePool", {{DType::i32, Shape{1, 1, 4, 4}}}, k2), "dtype i32");
  expect_invalid(spec_of("MaxPool", {{DType::i32, Shape{1, 1, 4, 4}}}, k2), "dtype i32");
  expect_invalid(spec_of("MaxPool", {{f, Shape{1, 4}}}, {{"kernel_shape", std::vector<int64_t>{}}}),
                 "spatial");
  expect_invalid(spec_of("GlobalAveragePool", {{f, Shape{4}}}), "N, C");
}

}  // namespace

}  // namespace d5::test
