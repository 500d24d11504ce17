// What only the oneDNN Softmax, Concat, LayerNormalization and LRN do: the kernel they run and
// the specs they refuse. Their values against the reference are shared cases (cases_norm.cpp,
// cases_movement.cpp).
#include "onednn_test_util.h"

namespace d5::test {

TEST(OnednnSoftmax, LastAxisRunsTheJitKernel) {
  const auto impl = onednn_implementation(spec_of("Softmax", {{DType::f32, Shape{8, 128}}}));
  EXPECT_NE(impl.find("jit"), std::string::npos) << impl;
}

TEST(OnednnConcat, InvalidShapesAreInvalidEverywhere) {
  const auto spec =
      spec_of("Concat", {{DType::f32, Shape{2, 3}}, {DType::f32, Shape{3, 3}}}, {{"axis", int64_t{1}}});
  EXPECT_EQ(onednn_answer(spec).rfind("invalid:", 0), 0u) << onednn_answer(spec);
}

TEST(OnednnLayerNorm, RefusesBroadcastParametersAndDoubleStatistics) {
  const auto f = DType::f32;
  EXPECT_NE(onednn_answer(spec_of("LayerNormalization", {{f, Shape{2, 8}}, {f, Shape{1}}})).find("broadcast"),
            std::string::npos);
  EXPECT_NE(onednn_answer(spec_of("LayerNormalization", {{f, Shape{2, 8}}, {f, Shape{8}}},
                                  {{"stash_type", int64_t{11}}}))
                .find("stash_type"),
            std::string::npos);
}

TEST(OnednnLrn, RefusesEvenSizes) {
  const auto spec = spec_of("LRN", {{DType::f32, Shape{1, 8, 2, 2}}}, {{"size", int64_t{4}}});
  EXPECT_NE(onednn_answer(spec).find("even size"), std::string::npos) << onednn_answer(spec);
}

}  // namespace d5::test
