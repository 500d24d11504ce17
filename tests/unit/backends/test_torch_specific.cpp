// What only the torch backend does or refuses: its fused BatchNormalization gradient, ATen's
// dropout generator, and the specs ATen cannot express (the shared cases, cases_*.cpp, compare
// every backend's results with the reference).
#include <cstring>

#include "torch_test_util.h"

namespace d5::test {

namespace {
TensorDesc f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorDesc f64(Shape s) { return {DType::f64, std::move(s)}; }
using Ints = std::vector<int64_t>;
}  // namespace

// Only Y has an upstream gradient: ATen's fused batch-norm backward, against the reference.
TEST(TorchSpecific, BatchNormalizationTrainingWithOnlyYsGradient) {
  register_builtin_operators();
  const Attributes train{{"training_mode", int64_t{1}}, {"momentum", 0.8}};
  const Shape x{3, 2, 4}, p{2};
  const std::vector<Tensor> in = {random_input({DType::f64, x}, "x", -2, 2), random_input({DType::f64, p}, "scale", 0.5, 1.5),
                                  random_input({DType::f64, p}, "bias"), random_input({DType::f64, p}, "mean"),
                                  random_input({DType::f64, p}, "var", 0.5, 2)};
  OpSpec s = spec_of("BatchNormalization",
                     {in[0].desc(), in[1].desc(), in[2].desc(), in[3].desc(), in[4].desc()}, train);
  auto op = OpRegistry::global().create(s, "torch");
  auto ref = OpRegistry::global().create(s, "reference");
  const auto out = op->run_forward(in);
  ref->run_forward(in);
  const std::vector<Tensor> gy = {random_input(out[0].desc(), "gy"), Tensor(), Tensor()};
  const auto gx = op->run_backward(gy, in, out);
  const auto ref_gx = ref->run_backward(gy, in, out);
  for (size_t i = 0; i < 3; ++i)
    expect_close(gx[i], ref_gx[i], tol_for(DType::f64), "gradient " + std::to_string(i));
}

// ReduceMax over an empty axis: ONNX's maximum of nothing is the lowest value; ATen refuses.
TEST(TorchSpecific, ReduceMaxOverAnEmptyAxisIsRefused) {
  const OpSpec empty = spec_of("ReduceMax", {f32({2, 0})}, {{"axes", std::vector<int64_t>{1}}});
  EXPECT_NE(torch_refusal(empty).find("empty axis"), std::string::npos) << torch_refusal(empty);
}

TEST(TorchSpecific, DropoutTrainingReusesItsMaskWhichIsTheReferences) {
  register_builtin_operators();
  const auto x = random_input(f64({64, 32}), "x", 1, 2);  // never zero: a zero output means dropped
  const auto ratio = Tensor::from_values<double>(Shape{}, {0.25});
  const auto training = Tensor::from_values<bool>(Shape{}, {true});
  const OpSpec s = spec_of("Dropout", {x.desc(), ratio.desc(), training.desc()});
  auto op = OpRegistry::global().create(s, "torch");
  const std::vector<Tensor> in = {x, ratio, training};
  const auto out = op->run_forward(in);
  ASSERT_EQ(out.size(), 2u);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = out[1].data_as<bool>()[i];
    kept += keep;
    // Kept elements are scaled by 1 / (1 - ratio), dropped ones are zero.
    EXPECT_DOUBLE_EQ(out[0].get(i), keep ? x.get(i) / 0.75 : 0.0);
  }
  // 2048 Bernoulli(0.75) draws: mean 1536, standard deviation ~20.
  EXPECT_NEAR(static_cast<double>(kept), 1536, 100);
  // Backward: the upstream gradient through the same mask and scale.
  const auto gy = random_input(out[0].desc(), "gy");
  const auto gx = op->run_backward(std::vector<Tensor>{gy, Tensor()}, in, out);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_DOUBLE_EQ(gx[0].get(i), out[1].data_as<bool>()[i] ? gy.get(i) / 0.75 : 0.0);
  // A second forward draws a different mask.
  const auto out2 = op->run_forward(in);
  EXPECT_NE(std::memcmp(out[1].data(), out2[1].data(), out[1].bytes()), 0);
  // Same seed, same first mask: runs repeat.
  auto again = OpRegistry::global().create(s, "torch");
  const auto out3 = again->run_forward(in);
  EXPECT_EQ(std::memcmp(out[1].data(), out3[1].data(), out[1].bytes()), 0);
  // The mask is the reference's (the same seeded stream per node name): a network with Dropout in
  // training validates against the reference.
  auto reference = OpRegistry::global().create(s, "reference");
  const auto expected = reference->run_forward(in);
  EXPECT_EQ(std::memcmp(out[1].data(), expected[1].data(), out[1].bytes()), 0);
  EXPECT_EQ(std::memcmp(out[0].data(), expected[0].data(), out[0].bytes()), 0);
}

TEST(TorchSpecific, AveragePoolWithDilationsIsRefused) {
  const OpSpec dilated = spec_of("AveragePool", {{DType::f32, {1, 1, 5, 5}}},
                                 {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}});
  EXPECT_NE(torch_refusal(dilated).find("no dilations"), std::string::npos) << torch_refusal(dilated);
}

TEST(TorchSpecific, ConvWithFourSpatialAxesIsRefused) {
  const OpSpec conv4d = spec_of("Conv", {{DType::f32, {1, 1, 3, 3, 3, 3}}, {DType::f32, {1, 1, 2, 2, 2, 2}}});
  EXPECT_NE(torch_refusal(conv4d).find("at most 3 spatial axes"), std::string::npos) << torch_refusal(conv4d);
}

TEST(TorchSpecific, RecurrentSpecsAtenCannotExpressAreRefused) {
  auto spec = [](const std::string& type, Attributes a, bool peephole = false) {
    const int64_t gates = type == "LSTM" ? 4 : type == "GRU" ? 3 : 1;
    std::vector<TensorDesc> in = {
        {DType::f32, {2, 1, 3}}, {DType::f32, {1, gates * 2, 3}}, {DType::f32, {1, gates * 2, 2}}};
    std::vector<bool> present = {true, true, true};
    if (peephole) {
      in.resize(8);
      present.resize(8, false);
      in[7] = {DType::f32, {1, 6}};
      present[7] = true;
    }
    OpSpec s = spec_of(type, in, std::move(a));
    if (peephole) s.present = present;
    return s;
  };
  auto refused = [](const OpSpec& s, const std::string& words) {
    const std::string why = torch_refusal(s);
    EXPECT_NE(why.find(words), std::string::npos) << s.label() << ": " << why;
  };
  refused(spec("GRU", {}), "linear_before_reset=0");
  refused(spec("GRU", {{"linear_before_reset", int64_t{1}}, {"clip", 2.0}}), "clip");
  refused(spec("LSTM", {{"input_forget", int64_t{1}}}), "input_forget");
  refused(spec("LSTM", {}, true), "peepholes");
  refused(spec("LSTM", {{"activations", std::vector<std::string>{"Sigmoid", "Relu", "Tanh"}}}),
          "fixed activations");
  refused(spec("RNN", {{"activations", std::vector<std::string>{"Sigmoid"}}}), "Tanh or Relu");
  EXPECT_EQ(torch_refusal(spec("LSTM", {})), "accepts");
}

}  // namespace d5::test
