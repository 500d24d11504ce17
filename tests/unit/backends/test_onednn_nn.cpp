// What only the oneDNN Conv, pooling and Gemm do: the specs they refuse and why, and the kernel
// a linear layer gets. Their values against the reference are shared cases (cases_nn.cpp).
#include "onednn_test_util.h"

namespace d5::test {

namespace {
Attributes with(Attributes a, const std::string& k, AttrValue v) {
  a.set(k, std::move(v));
  return a;
}
using Ints = std::vector<int64_t>;
}  // namespace

TEST(OnednnConv, InvalidSpecsAreInvalidEverywhere) {
  // W has 3 input channels for an X of 4.
  const auto spec = spec_of("Conv", {{DType::f32, Shape{1, 4, 5, 5}}, {DType::f32, Shape{2, 3, 3, 3}}});
  EXPECT_EQ(onednn_answer(spec).rfind("invalid:", 0), 0u) << onednn_answer(spec);
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

TEST(OnednnGemm, LinearLayerRunsTheBrgemmKernel) {
  // torch.nn.Linear exports Gemm(transB=1) with a bias row: the fast path, C as matmul's bias.
  const auto spec =
      spec_of("Gemm", {{DType::f32, Shape{32, 256}}, {DType::f32, Shape{128, 256}}, {DType::f32, Shape{128}}},
              {{"transB", int64_t{1}}});
  const auto impl = onednn_implementation(spec);
  const std::string forward = impl.substr(0, impl.find(" bwd:"));
  // Never oneDNN's reference kernel. Which fast kernel depends on the CPU: oneDNN's f32 brgemm
  // matmul needs AVX-512 (avx512_core); with AVX2 alone the matmul runs its jit sgemm ("gemm:jit").
  EXPECT_EQ(forward.find("ref"), std::string::npos) << impl;
  const bool avx512_core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512_core) {
    EXPECT_NE(forward.find("brg"), std::string::npos) << impl;
  } else {
    EXPECT_NE(forward.find("gemm:jit"), std::string::npos) << impl;
  }
}

}  // namespace d5::test
