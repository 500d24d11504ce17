#include <gtest/gtest.h>

#include <algorithm>

#include <limits>

#include <cmath>

#include <cstdint>
#include <cstdlib>

#include "deep500/core/tensor.h"

namespace d5 {

TEST(Tensor, OwnedIsAlignedAndZeroed) {
  Tensor t(DType::f32, Shape{3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kTensorAlignment, 0u);
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_FALSE(t.is_view());
  EXPECT_EQ(t.bytes(), 60u);
}

TEST(Tensor, CopiesShareStorageCloneDoesNot) {
  Tensor a(DType::f64, Shape{4});
  Tensor b = a;
  b.at<double>({1}) = 2.5;
  EXPECT_EQ(a.at<double>({1}), 2.5);
  Tensor c = a.clone();
  c.at<double>({1}) = 7;
  EXPECT_EQ(a.at<double>({1}), 2.5);
}

TEST(Tensor, ViewBorrowsCallerMemory) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor v = Tensor::view(TensorDesc{DType::f32, Shape{2, 3}, Layout::any}, buf);
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.at<float>({1, 2}), 6.0f);
  v.at<float>({0, 0}) = 9;
  EXPECT_EQ(buf[0], 9.0f);
  EXPECT_THROW(v.at<float>({2, 0}), InvalidArgument);
  EXPECT_THROW(v.at<float>({0}), InvalidArgument);
  EXPECT_THROW(v.data_as<double>(), InvalidArgument);
}

// The direct f32 <-> f16/bf16 casts round exactly as the element-wise conversions do, specials
// and subnormals included.
TEST(Tensor, HalfCastsRoundAsTheScalarConversions) {
  const std::vector<float> v = {0.0f, -0.0f, 1.0f, 65504.0f, 70000.0f, 1e-7f, 6.1e-5f, -2.5e-8f, 3.14159f,
                                std::numeric_limits<float>::infinity(), std::nanf(""), 1.0f + 0x1p-11f,
                                1.0f + 0x1p-8f, 3.4e38f};
  Tensor f(DType::f32, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), f.data_as<float>());
  const Tensor h = f.cast(DType::f16), b = f.cast(DType::bf16);
  const Tensor hf = h.cast(DType::f32), bf = b.cast(DType::f32);
  for (size_t i = 0; i < v.size(); ++i) {
    SCOPED_TRACE(v[i]);
    EXPECT_EQ(h.data_as<Half>()[i].bits, float_to_half(v[i]));
    EXPECT_EQ(b.data_as<BFloat16>()[i].bits, float_to_bfloat16(v[i]));
    const float back_h = half_to_float(float_to_half(v[i])), back_b = bfloat16_to_float(float_to_bfloat16(v[i]));
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(hf.data_as<float>()[i]) && std::isnan(bf.data_as<float>()[i]));
    } else {
      EXPECT_EQ(hf.data_as<float>()[i], back_h);
      EXPECT_EQ(bf.data_as<float>()[i], back_b);
    }
  }
}

TEST(Tensor, FillCastAndGenericAccess) {
  Tensor t(DType::i32, Shape{2, 2});
  t.fill(7);
  EXPECT_EQ(t.at<int32_t>({1, 1}), 7);
  Tensor h = t.cast(DType::f16);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(h.get(3), 7.0);
  Tensor b = Tensor::from_values<float>(Shape{3}, {0.0f, 2.0f, -1.0f}).cast(DType::boolean);
  EXPECT_EQ(b.get(0), 0.0);
  EXPECT_EQ(b.get(1), 1.0);
  EXPECT_EQ(b.get(2), 1.0);
  // Refuse values an integer dtype cannot hold instead of invoking undefined behaviour.
  Tensor i8(DType::i8, Shape{1});
  EXPECT_THROW(i8.fill(300), InvalidArgument);
  EXPECT_THROW(i8.set(0, std::nan("")), InvalidArgument);
}

TEST(Tensor, ReshapeSharesBuffer) {
  Tensor t = Tensor::from_values<int64_t>(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshape(Shape{3, 2});
  EXPECT_EQ(r.at<int64_t>({2, 1}), 6);
  EXPECT_EQ(r.data(), t.data());
  EXPECT_THROW(t.reshape(Shape{4}), InvalidArgument);
}

TEST(Tensor, CopyFromChecksDesc) {
  Tensor a(DType::f32, Shape{2}), b(DType::f32, Shape{3});
  EXPECT_THROW(a.copy_from(b), InvalidArgument);
  Tensor c = Tensor::from_values<float>(Shape{2}, {1, 2});
  a.copy_from(c);
  EXPECT_EQ(a.at<float>({1}), 2.0f);
}

TEST(Tensor, CompareReportsWorstElement) {
  Tensor a = Tensor::from_values<float>(Shape{4}, {1.0f, 2.0f, 3.0f, 4.0f});
  Tensor b = Tensor::from_values<float>(Shape{4}, {1.0f, 2.5f, 3.0f, 4.001f});
  auto c = compare(a, b, 1e-3, 0.0);
  EXPECT_EQ(c.worst_index, 1);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(c.max_rel_error, 0.2);
  EXPECT_EQ(c.mismatches, 1);  // 4 vs 4.001 is within rtol 1e-3
  EXPECT_FALSE(allclose(a, b));
  EXPECT_TRUE(allclose(a, a.clone()));

  Tensor n = Tensor::from_values<float>(Shape{1}, {std::nanf("")});
  Tensor z = Tensor::from_values<float>(Shape{1}, {0.0f});
  EXPECT_TRUE(compare(n, z, 1, 1).nan_mismatch);
  EXPECT_TRUE(allclose(n, n.clone()));  // NaN where the reference has NaN is a match
}

TEST(Tensor, MemoryHighWaterMark) {
  reset_tensor_peak_memory();
  const auto before = tensor_memory_stats();
  {
    Tensor big(DType::f32, Shape{1 << 20});  // 4 MiB
    EXPECT_GE(tensor_memory_stats().current_bytes, before.current_bytes + (4 << 20));
  }
  const auto after = tensor_memory_stats();
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_GE(after.peak_bytes, before.current_bytes + (4 << 20));
}

TEST(Tensor, AdoptOwnsAForeignBufferAndCountsIt) {
  const TensorDesc d{DType::f32, Shape{256}, Layout::any};
  bool released = false;
  void* buf = std::aligned_alloc(kTensorAlignment, d.bytes());
  std::shared_ptr<void> owner(buf, [&released](void* p) {
    released = true;
    std::free(p);
  });
  reset_tensor_peak_memory();
  const auto before = tensor_memory_stats();
  {
    Tensor t = Tensor::adopt(d, buf, std::move(owner));
    EXPECT_FALSE(t.is_view());
    EXPECT_EQ(t.data(), buf);
    EXPECT_EQ(tensor_memory_stats().current_bytes, before.current_bytes + static_cast<int64_t>(d.bytes()));
    EXPECT_EQ(tensor_memory_stats().allocations, before.allocations + 1);
    Tensor copy = t;  // copies share the buffer, as with an allocated one
    t = Tensor();
    EXPECT_FALSE(released);
    copy.span<float>()[255] = 1.5f;
  }
  EXPECT_TRUE(released);
  EXPECT_EQ(tensor_memory_stats().current_bytes, before.current_bytes);
  EXPECT_GE(tensor_memory_stats().peak_bytes, before.current_bytes + static_cast<int64_t>(d.bytes()));
}

TEST(Tensor, AdoptRefusesMisalignedBuffers) {
  const TensorDesc d{DType::f32, Shape{4}, Layout::any};
  auto owner = std::shared_ptr<void>(std::aligned_alloc(kTensorAlignment, 128), std::free);
  auto* misaligned = static_cast<char*>(owner.get()) + 4;
  EXPECT_FALSE(is_tensor_aligned(misaligned));
  EXPECT_THROW(Tensor::adopt(d, misaligned, owner), InvalidArgument);
  EXPECT_THROW(Tensor::adopt(d, owner.get(), nullptr), InvalidArgument);
  EXPECT_NO_THROW(Tensor::adopt(d, owner.get(), owner));
}

}  // namespace d5
