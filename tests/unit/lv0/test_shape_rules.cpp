// The shared shape rules and op_semantics, against values worked out by hand.
#include <gtest/gtest.h>

#include "../ops/op_test_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/op/op_semantics.h"
#include "deep500/spi/shape_rules.h"

namespace d5 {
namespace {

using test::spec_of;

TEST(ShapeRules, BroadcastingFollowsNumPyAndNamesTheOpOnAMismatch) {
  const OpSpec s = spec_of("Add", {{DType::f32, {2, 1, 4}}, {DType::f32, {3, 1}}});
  EXPECT_EQ(broadcast_shapes({Shape{2, 1, 4}, Shape{3, 1}}, s), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({Shape{}, Shape{5}}, s), (Shape{5}));
  try {
    broadcast_shapes({Shape{2, 3}, Shape{4}}, s);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3] and [4] cannot be broadcast"), std::string::npos) << e.what();
  }
}

TEST(ShapeRules, AxesCountFromTheEndAndOutOfRangeIsRefused) {
  const OpSpec s = spec_of("Softmax", {{DType::f32, {2, 3, 4}}});
  EXPECT_EQ(checked_axis(s, -1, 3), 2u);
  EXPECT_EQ(checked_axis(s, 0, 3), 0u);
  EXPECT_THROW(checked_axis(s, 3, 3), InvalidArgument);
  EXPECT_THROW(checked_axis(s, -4, 3), InvalidArgument);
}

TEST(ShapeRules, SameUpperPutsTheOddPadAtTheEnd) {
  // 5 pixels, kernel 2, stride 2: ceil(5/2) = 3 positions need (3-1)*2 + 2 - 5 = 1 pad.
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{2});
  a.set("strides", std::vector<int64_t>{2});
  a.set("auto_pad", std::string("SAME_UPPER"));
  const OpSpec s = spec_of("MaxPool", {{DType::f32, {1, 1, 5}}}, a);
  const Window w = sliding_window(s, parse_window_attrs(s, 1, {}), {5}, false);
  EXPECT_EQ(w.positions, (std::vector<int64_t>{3}));
  EXPECT_EQ(w.pads_begin, (std::vector<int64_t>{0}));
  EXPECT_EQ(w.pads_end, (std::vector<int64_t>{1}));
  // Windows {0,1}, {2,3}, {4,pad}: 5 taps read the image.
  EXPECT_EQ(taps_in_image(w), 5);
}

TEST(ShapeRules, TapsInImageMultiplyOverAxes) {
  // 3x3 image, 3x3 kernel, pads 1: per axis, positions 0..2 see 2, 3, 2 taps -> 7; 7 * 7 = 49.
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const OpSpec s = spec_of("AveragePool", {{DType::f32, {1, 1, 3, 3}}}, a);
  const Window w = sliding_window(s, parse_window_attrs(s, 2, {}), {3, 3}, false);
  EXPECT_EQ(w.position_count(), 9);
  EXPECT_EQ(taps_in_image(w), 49);
}

TEST(ShapeRules, ConvWorkCountsMultiplyAddsAsTwo) {
  // X [2, 4, 5, 5], W [6, 2, 3, 3], group 2: 3x3 positions, each 6 channels x (4/2 * 9) taps.
  Attributes a;
  a.set("group", int64_t{2});
  const OpSpec s = spec_of("Conv", {{DType::f32, {2, 4, 5, 5}}, {DType::f32, {6, 2, 3, 3}}}, a);
  const ConvDims d = conv_dims(s, false);
  const Window w = sliding_window(s, parse_window_attrs(s, 2, d.kernel), d.image, false);
  EXPECT_DOUBLE_EQ(conv_flops(d, w, false), 2.0 * 2 * 9 * 6 * 2 * 9);
  EXPECT_EQ(d.gradient_mask(2), (std::vector<bool>{true, true}));
}

TEST(ShapeRules, ConvTransposeOutputShapeSplitsTheCutLikeSameUpper) {
  // 3 pixels, stride 2, kernel 3: full output 2*2 + 3 = 7; output_shape 6 cuts 1, at the end.
  Attributes a;
  a.set("strides", std::vector<int64_t>{2});
  a.set("output_shape", std::vector<int64_t>{6});
  a.set("auto_pad", std::string("SAME_UPPER"));
  const OpSpec s = spec_of("ConvTranspose", {{DType::f32, {1, 1, 3}}, {DType::f32, {1, 1, 3}}}, a);
  const Window w = transposed_window(s, conv_dims(s, true));
  EXPECT_EQ(w.image, (std::vector<int64_t>{6}));
  EXPECT_EQ(w.pads_begin, (std::vector<int64_t>{0}));
  EXPECT_EQ(w.pads_end, (std::vector<int64_t>{1}));
}

TEST(ShapeRules, BatchNormParametersArePerChannel) {
  const OpSpec ok = spec_of("BatchNormalization", {{DType::f32, {2, 3, 4}},
                                                   {DType::f32, {3}},
                                                   {DType::f32, {3}},
                                                   {DType::f32, {3}},
                                                   {DType::f32, {3}}});
  EXPECT_EQ(batch_norm_outputs(ok).size(), 1u);
  const OpSpec bad = spec_of("BatchNormalization", {{DType::f32, {2, 3, 4}},
                                                    {DType::f32, {4}},
                                                    {DType::f32, {3}},
                                                    {DType::f32, {3}},
                                                    {DType::f32, {3}}});
  EXPECT_THROW(batch_norm_outputs(bad), InvalidArgument);
}

TEST(OpSemantics, AreTheOraclesCountsForTheSpec) {
  register_builtin_operators();
  const OpSpec s = spec_of("Conv", {{DType::f32, {1, 2, 4, 4}}, {DType::f32, {3, 2, 3, 3}}, {DType::f32, {3}}});
  const OpSemantics sem = op_semantics(s);
  ASSERT_EQ(sem.outputs.size(), 1u);
  EXPECT_EQ(sem.outputs[0].shape, (Shape{1, 3, 2, 2}));
  EXPECT_EQ(sem.differentiable, (std::vector<bool>{true, true, true}));
  // 2x2 positions, 3 channels, 2 * 9 taps each, a multiply-add as two.
  EXPECT_DOUBLE_EQ(sem.flops, 2.0 * 4 * 3 * 18);
  // Inputs and the output once, in f32.
  EXPECT_DOUBLE_EQ(sem.bytes, 4.0 * (32 + 54 + 3 + 12));
}

TEST(OpSemantics, AnInvalidSpecIsRefusedAndAnUnknownTypeSaysWhy) {
  register_builtin_operators();
  EXPECT_THROW(op_semantics(spec_of("Add", {{DType::f32, {2, 3}}, {DType::f32, {4}}})), InvalidArgument);
  try {
    op_semantics(spec_of("NoSuchOperator", {{DType::f32, {2}}}));
    FAIL() << "no exception";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("defined by the reference backend"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d5
