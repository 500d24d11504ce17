// oneDNN backend behaviour shared by every operator: refusals with reasons, fallback, creation-time
// preparation (no primitive is created by forward or backward) and implementation names.
#include "backends/onednn/onednn_common.h"
#include "deep500/backends/builtin.h"
#include "onednn_test_util.h"

namespace d5::test {

namespace {
using Ints = std::vector<int64_t>;

OpSpec conv(DType t) {
  return spec_of("Conv", {{t, Shape{2, 8, 9, 9}}, {t, Shape{16, 8, 3, 3}}, {t, Shape{16}}},
                 {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}});
}
}  // namespace

TEST(OnednnBackend, RefusesNonF32WithAReason) {
  for (DType t : {DType::f64, DType::bf16, DType::i32}) {
    const auto answer = onednn_answer(conv(t));
    EXPECT_NE(answer.find("f32 only"), std::string::npos) << answer;
    EXPECT_NE(answer.find(std::string(to_string(t))), std::string::npos) << answer;
  }
  for (const char* type : {"Relu", "Softmax"})
    EXPECT_NE(onednn_answer(spec_of(type, {{DType::f64, Shape{4, 4}}})).find("f32 only"), std::string::npos);
}

TEST(OnednnBackend, FallbackRunsTheReferenceAndSaysWhy) {
  register_builtin_operators();
  std::vector<Refusal> why;
  const auto spec = spec_of("Softmax", {{DType::f64, Shape{4, 5}}});
  auto op = OpRegistry::global().create_with_fallback(spec, {"onednn", "reference"}, &why);
  EXPECT_EQ(op->implementation(), "reference");
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why[0].implementation, "onednn");
  EXPECT_NE(why[0].reason.find("f64"), std::string::npos) << why[0].reason;
  // Without fallback the error names the reason too.
  try {
    OpRegistry::global().create(spec, "onednn");
    ADD_FAILURE() << "expected Unimplemented";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("f32 only"), std::string::npos) << e.what();
  }
}

TEST(OnednnBackend, EveryOperatorStatesItsLimits) {
  register_builtin_operators();
  int count = 0;
  for (const auto& type : OpRegistry::global().op_types())
    for (const auto& impl : OpRegistry::global().implementations(type, "onednn")) {
      EXPECT_FALSE(impl->notes.empty()) << type;
      EXPECT_TRUE(impl->backward) << type;
      ++count;
    }
  EXPECT_GE(count, 35);
}

// Everything is prepared when the operator is created: forward and backward only bind buffers
// and execute, so repeated calls create no primitive (compute or reorder).
TEST(OnednnBackend, CallsCreateNoPrimitives) {
  const auto f = DType::f32;
  auto max_pool =
      spec_of("MaxPool", {{f, Shape{2, 4, 9, 9}}}, {{"kernel_shape", Ints{3, 3}}, {"ceil_mode", int64_t{1}}});
  max_pool.num_outputs = 1;
  const OpSpec specs[] = {
      conv(f),
      spec_of("ConvTranspose", {{f, Shape{1, 4, 5, 5}}, {f, Shape{4, 2, 3, 3}}}, {{"strides", Ints{2, 2}}}),
      max_pool,
      spec_of("BatchNormalization",
              {{f, Shape{4, 3, 5, 5}}, {f, Shape{3}}, {f, Shape{3}}, {f, Shape{3}}, {f, Shape{3}}},
              {{"training_mode", int64_t{1}}}),
      spec_of("Gemm", {{f, Shape{5, 7}}, {f, Shape{3, 7}}, {f, Shape{5, 1}}},
              {{"transB", int64_t{1}}, {"beta", 0.5}}),
      spec_of("MatMul", {{f, Shape{1, 4, 6}}, {f, Shape{3, 6, 5}}}),
      spec_of("Sub", {{f, Shape{1, 3}}, {f, Shape{4, 3}}}),
      spec_of("Selu", {{f, Shape{10}}}),
      spec_of("Concat", {{f, Shape{2, 3}}, {f, Shape{2, 4}}}, {{"axis", int64_t{1}}}),
      spec_of("LayerNormalization", {{f, Shape{3, 8}}, {f, Shape{8}}, {f, Shape{8}}}),
  };
  register_builtin_operators();
  for (const auto& spec : specs) {
    const int64_t before = onednn::primitives_created();
    auto op = OpRegistry::global().create(spec, "onednn");
    const int64_t created = onednn::primitives_created();
    EXPECT_GT(created, before) << spec.label();
    auto in = random_inputs(spec, 0.5, 1.5);
    for (int call = 0; call < 3; ++call) {
      const auto out = op->run_forward(in);
      std::vector<Tensor> gy;
      for (const auto& o : out) gy.push_back(random_input(o.desc(), "gy"));
      op->run_backward(gy, in, out);
    }
    EXPECT_EQ(onednn::primitives_created(), created) << spec.label() << " created primitives while running";
  }
}

TEST(OnednnBackend, ImplementationNamesThePrimitiveImplementations) {
  const auto impl = onednn_implementation(conv(DType::f32));
  EXPECT_EQ(impl.rfind("onednn:", 0), 0u) << impl;
  // oneDNN's own implementation names, e.g. "jit:avx512_core" or "brgconv:avx2".
  EXPECT_NE(impl.find(':', 7), std::string::npos) << impl;
  EXPECT_EQ(impl.find("ref:any"), std::string::npos) << impl;
}

TEST(OnednnBackend, UndefinedUpstreamGradientsMeanZero) {
  register_builtin_operators();
  for (const auto& spec : {conv(DType::f32), spec_of("Softmax", {{DType::f32, Shape{3, 4}}})}) {
    auto op = OpRegistry::global().create(spec, "onednn");
    const auto in = random_inputs(spec);
    const auto out = op->run_forward(in);
    const auto gx = op->run_backward(std::vector<Tensor>(out.size()), in, out);
    for (const auto& g : gx) {
      if (!g.defined()) continue;
      for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(g.get(i), 0.0) << spec.label();
    }
  }
}

// A caller may ask for some gradients only (a first layer's input needs none); oneDNN still
// writes the others, into buffers of the operator's own, and the asked-for ones must not change.
TEST(OnednnBackend, PartialGradientsMatchFullOnes) {
  const auto f = DType::f32;
  const OpSpec specs[] = {
      conv(f),
      spec_of("BatchNormalization",
              {{f, Shape{4, 3, 5, 5}}, {f, Shape{3}}, {f, Shape{3}}, {f, Shape{3}}, {f, Shape{3}}},
              {{"training_mode", int64_t{1}}}),
      spec_of("LayerNormalization", {{f, Shape{3, 8}}, {f, Shape{8}}, {f, Shape{8}}}),
      spec_of("Gemm", {{f, Shape{5, 7}}, {f, Shape{7, 3}}, {f, Shape{3}}}),
  };
  register_builtin_operators();
  for (const auto& spec : specs) {
    auto op = OpRegistry::global().create(spec, "onednn");
    auto in = random_inputs(spec, 0.5, 1.5);
    const auto out = op->run_forward(in);
    std::vector<Tensor> gy;
    for (const auto& o : out) gy.push_back(random_input(o.desc(), "gy"));
    const auto full = op->run_backward(gy, in, out);
    const auto mask = op->differentiable_inputs();
    for (size_t keep = 0; keep < mask.size(); ++keep) {
      if (!mask[keep]) continue;
      std::vector<Tensor> gx(spec.inputs.size());
      gx[keep] = Tensor(spec.inputs[keep]);
      op->backward(gy, in, out, gx);
      expect_close(gx[keep], full[keep], {0, 0},
                   spec.label() + " gradient " + std::to_string(keep) + " alone");
    }
  }
}

}  // namespace d5::test
