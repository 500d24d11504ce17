// oneDNN eltwise operators: what only oneDNN does (the jit kernel, bounds it needs at creation).
// Their values against the reference are shared cases (cases_elementwise.cpp).
#include "onednn_test_util.h"

namespace d5::test {

TEST(OnednnEltwise, ClipWithRuntimeBoundsIsRefused) {
  const auto f = DType::f32;
  const auto spec = spec_of("Clip", {{f, Shape{4}}, {f, Shape{}}, {f, Shape{}}});
  EXPECT_NE(onednn_answer(spec).find("constant known when the operator is created"), std::string::npos)
      << onednn_answer(spec);
}

TEST(OnednnEltwise, ImplementationNamesTheJitKernel) {
  const auto spec = spec_of("Tanh", {{DType::f32, Shape{64, 64}}});
  EXPECT_EQ(onednn_implementation(spec).rfind("onednn:", 0), 0u);
  EXPECT_NE(onednn_implementation(spec).find("jit"), std::string::npos) << onednn_implementation(spec);
}

}  // namespace d5::test
