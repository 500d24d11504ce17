#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "deep500/core/dtype.h"
#include "deep500/core/error.h"
#include "deep500/core/tensor_desc.h"

namespace d5 {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("int64"), DType::i64);
  EXPECT_THROW(parse_dtype("f31"), InvalidArgument);
}

TEST(DType, HalfConversionExactValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);              // largest finite half
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);              // rounds to +inf
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);              // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);              // tie rounds to even (0)
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);            // above the tie rounds up
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);              // smallest normal
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);       // tie to even (down)
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);   // tie to even (up)
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

TEST(DType, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00) continue;  // inf/NaN
    ASSERT_EQ(float_to_half(half_to_float(bits)), bits) << std::hex << h;
  }
}

TEST(DType, BFloat16Conversion) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);       // tie to even (down)
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);   // tie to even (up)
  EXPECT_EQ(float_to_bfloat16(3.14159265f), 0x4049);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
}

TEST(TensorDesc, CAbiRoundTrip) {
  TensorDesc d{DType::bf16, Shape{2, 3, 4, 5}, Layout::nhwc};
  d5_tensor_desc c = d.to_c();
  EXPECT_EQ(c.dtype, D5_DTYPE_BF16);
  EXPECT_EQ(c.layout, D5_LAYOUT_NHWC);
  EXPECT_EQ(c.rank, 4);
  EXPECT_EQ(c.dims[3], 5);
  EXPECT_EQ(TensorDesc::from_c(c), d);
  EXPECT_EQ(d.bytes(), 2u * 3 * 4 * 5 * 2);
  EXPECT_EQ(d.to_string(), "bf16[2, 3, 4, 5]@nhwc");

  c.dtype = 99;
  EXPECT_THROW(TensorDesc::from_c(c), InvalidArgument);
  TensorDesc big{DType::f32, Shape(std::vector<int64_t>(9, 1)), Layout::any};
  EXPECT_THROW(big.to_c(), InvalidArgument);
}

TEST(Shape, AxesStridesAndErrors) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(s.dim(-1), 4);
  EXPECT_EQ(s.normalize_axis(-3), 0u);
  EXPECT_THROW(s.dim(3), InvalidArgument);
  EXPECT_THROW(Shape({2, -1}), InvalidArgument);
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_THROW(Shape({int64_t{1} << 40, int64_t{1} << 40}).numel(), InvalidArgument);
}

}  // namespace d5
