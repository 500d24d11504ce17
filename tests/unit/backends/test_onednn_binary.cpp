// oneDNN binary operators (Add Sub Mul Div Max Min): what only oneDNN does, the kernel it picks
// and what it refuses. Their values against the reference, with broadcasting and ties, are shared
// cases (cases_elementwise.cpp).
#include "onednn_test_util.h"

namespace d5::test {

namespace {
struct ShapePair {
  Shape a, b;
};
}  // namespace

TEST(OnednnBinary, JitKernelWhenOnlyTheSecondInputBroadcasts) {
  // Add is commutative: a broadcast first input is swapped into the second place.
  for (const auto& [a, b] : {ShapePair{Shape{8, 64}, Shape{64}}, ShapePair{Shape{64}, Shape{8, 64}}}) {
    const auto impl = onednn_implementation(spec_of("Add", {{DType::f32, a}, {DType::f32, b}}));
    EXPECT_EQ(impl.find("onednn:ref"), std::string::npos) << impl;
  }
}

TEST(OnednnBinary, RefusesWhatItCannotExpress) {
  const auto f = DType::f32;
  EXPECT_NE(onednn_answer(spec_of("Max", {{f, Shape{3}}, {f, Shape{3}}, {f, Shape{3}}})).find("two inputs"),
            std::string::npos);
  EXPECT_NE(onednn_answer(spec_of("Add", {{f, Shape{2, 3}}, {f, Shape{3}}}, {{"broadcast", int64_t{1}}}))
                .find("legacy"),
            std::string::npos);
  EXPECT_NE(onednn_answer(spec_of("Add", {{DType::i64, Shape{3}}, {DType::i64, Shape{3}}})).find("f32 only"),
            std::string::npos);
  // Shapes that do not broadcast are invalid for every backend: InvalidArgument, not a refusal.
  EXPECT_EQ(onednn_answer(spec_of("Add", {{f, Shape{2, 3}}, {f, Shape{4}}})).rfind("invalid:", 0), 0u);
}

}  // namespace d5::test
