// Shared cases: element-wise ops against the reference: activations and math functions, broadcasting
// arithmetic, variadic ops, comparisons, Where, Cast.
#include <cmath>

#include "shared_cases.h"

namespace d5::test {

namespace {

TensorDesc f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorDesc f64(Shape s) { return {DType::f64, std::move(s)}; }

}  // namespace

TEST(Elementwise, ActivationsMatchReference) {
  const std::vector<std::pair<std::string, Attributes>> ops = {
      {"Relu", {}},
      {"LeakyRelu", {}},
      {"LeakyRelu", {{"alpha", 0.3}}},
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"Elu", {}},
      {"Elu", {{"alpha", 0.5}}},
      {"Selu", {}},
      {"Selu", {{"alpha", 1.5}, {"gamma", 2.0}}},
      {"Gelu", {}},
      {"Gelu", {{"approximate", std::string("tanh")}}},
      {"Softplus", {}},
      {"HardSigmoid", {}},
      {"HardSigmoid", {{"alpha", 1.0 / 6}, {"beta", 0.5}}},
      {"HardSwish", {}},
      {"Neg", {}},
      {"Abs", {}},
      {"Exp", {}},
      {"Erf", {}},
      {"Mish", {}},
  };
  // Vector lengths with and without a remainder, and a tensor of several vector blocks per row.
  for (const auto& [type, attrs] : ops)
    for (const auto& d : {f32({2, 3, 5}), f64({7}), f32({}), f32({1}), f32({2, 3, 17}), f32({4, 16, 9, 9})}) {
      // [-4, 4) crosses every kink (HardSwish at +-3, HardSigmoid's clamps) at random points.
      check(type, random_inputs({d}, -4, 4), attrs);
    }
}

TEST(Elementwise, PositiveDomainFunctions) {
  for (const char* type : {"Sqrt", "Log", "Reciprocal"})
    for (const auto& d : {f32({4, 6}), f64({3, 1, 2}), f32({}), f32({2, 3, 17}), f32({4, 16, 9, 9})})
      check(type, random_inputs({d}, 0.5, 3), {});
}

TEST(Elementwise, IntegerUnaryOps) {
  for (const char* type : {"Relu", "Neg", "Abs"})
    for (DType t : {DType::i32, DType::i64, DType::i8})
      check(type, random_inputs({{t, Shape{10}}}, -50, 50), {});
}

TEST(Elementwise, Clip) {
  const auto x = random_input(f32({3, 4}), "x", -2, 2);
  check("Clip", {x}, {});  // no bounds: the identity
  check("Clip",
        {x, Tensor::from_values<float>(Shape{}, {-0.5f}), Tensor::from_values<float>(Shape{}, {0.7f})});
  check("Clip", {x, Tensor(), Tensor::from_values<float>(Shape{}, {0.2f})});
  check("Clip", {x, Tensor::from_values<float>(Shape{}, {0.1f})});
  check("Clip", {x}, {{"min", -1.0}, {"max", 1.5}}, std::nullopt, 6);  // opset 6 attributes
  const auto xi = random_input({DType::i32, Shape{12}}, "xi", -20, 20);
  check("Clip",
        {xi, Tensor::from_values<int32_t>(Shape{}, {-3}), Tensor::from_values<int32_t>(Shape{}, {5})});
  check("Clip", {xi}, {{"min", -2.5}, {"max", 4.5}}, std::nullopt, 6);  // integer bounds truncate
  // Bounds known when the operator is created (initializers), as a backend that fuses them wants.
  const Tensor lo = Tensor::from_values<float>(Shape{}, {-0.25f}), hi = Tensor::from_values<float>(Shape{}, {0.5f});
  const auto y = random_input(f32({5, 6}), "y", -1, 1);
  check_spec(spec_of("Clip", {y.desc(), lo.desc(), hi.desc()}, {}, {std::nullopt, lo, hi}), {y, lo, hi});
  OpSpec only_max = spec_of("Clip", {y.desc(), lo.desc(), hi.desc()}, {}, {std::nullopt, std::nullopt, hi});
  only_max.present = {true, false, true};
  check_spec(only_max, {y, Tensor(), hi});
}

TEST(Elementwise, BinaryArithmeticBroadcasts) {
  // Either input broadcasting, both, scalars, middle and last axes, and rows of whole vectors.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}},       {{2, 1, 4}, {3, 1}},  {{}, {2, 2}},    {{4, 1}, {}},
      {{0, 3}, {3}},    {{2, 3, 4}, {4}},    {{1, 3}, {4, 3}},     {{}, {5}},       {{6, 1, 5}, {6, 7, 1}},
      {{16, 32}, {16, 32}}};
  // Max and Min with two inputs: random values, so no ties (those are below).
  for (const char* type : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (const auto& [a, b] : shapes)
      for (DType t : {DType::f32, DType::f64}) {
        auto in = random_inputs({{t, a}, {t, b}});
        if (std::string(type) == "Div") in[1] = random_input({t, b}, "den", 0.5, 2);
        check(type, in);
      }
}

TEST(Elementwise, IntegerArithmeticWrapsAndTruncates) {
  const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  const auto a = Tensor::from_values<int32_t>(Shape{6}, {hi, lo, 7, -7, lo, 9});
  const auto b = Tensor::from_values<int32_t>(Shape{6}, {1, -1, 2, 2, 3, -4});
  for (const char* type : {"Add", "Sub", "Mul", "Div"}) check(type, {a, b});
  const auto u = Tensor::from_values<uint8_t>(Shape{3}, {250, 3, 100});
  const auto v = Tensor::from_values<uint8_t>(Shape{3}, {10, 7, 3});
  for (const char* type : {"Add", "Sub", "Mul", "Div"}) check(type, {u, v});
  // Integer division by zero is an error on every backend.
  expect_run_refused_everywhere(spec_of("Div", {a.desc(), a.desc()}), {a, Tensor(a.desc())});
}

TEST(Elementwise, LegacyBroadcastWithAxis) {
  // Opset 6: B [3] aligned at axis 1 of A [2, 3, 4].
  check("Add", random_inputs({f32({2, 3, 4}), f32({3})}), {{"broadcast", int64_t{1}}, {"axis", int64_t{1}}},
        std::nullopt, 6);
  check("Mul", random_inputs({f64({2, 3, 4}), f64({3, 4})}),
        {{"broadcast", int64_t{1}}, {"axis", int64_t{-2}}}, std::nullopt, 6);
}

TEST(Elementwise, Pow) {
  // Positive bases: both gradients are smooth.
  for (const auto& [a, b] :
       std::vector<std::pair<Shape, Shape>>{{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4}, {}}}) {
    check("Pow", {random_input(f32(a), "a", 0.5, 2), random_input(f32(b), "b", -2, 2)});
    check("Pow", {random_input(f64(a), "a", 0.5, 2), random_input(f64(b), "b", -2, 2)});
  }
  // Non-positive bases with integral exponents: the exponent's gradient is 0 there (reference's
  // choice; ATen's formula gives NaN), the base's is b a^(b-1), 0 where b = 0.
  const auto base = Tensor::from_values<double>(Shape{5}, {-2, -0.5, 0, 1.5, -3});
  const auto expo = Tensor::from_values<double>(Shape{5}, {2, 3, 2, 0, 0});
  check("Pow", {base, expo});
  // Mixed dtypes: f32 base, f64 and int exponents.
  check("Pow", {random_input(f32({3}), "a", 0.5, 2), random_input(f64({3}), "b", -1, 1)});
  check("Pow", {random_input(f32({3}), "a", -2, 2), Tensor::from_values<int64_t>(Shape{3}, {2, 3, 0})});
  // Integer bases: exact powers, negative exponents truncate (1, -1, 0), float exponents truncate.
  check("Pow", {Tensor::from_values<int32_t>(Shape{6}, {2, -3, 1, -1, -1, 5}),
                Tensor::from_values<int32_t>(Shape{6}, {10, 3, -4, -3, -2, -1})});
  check("Pow", {Tensor::from_values<int64_t>(Shape{3}, {4, 9, 2}),
                Tensor::from_values<double>(Shape{3}, {0.5, 0.5, 2.5})});
  const auto zero = Tensor::from_values<int32_t>(Shape{1}, {0}),
             neg = Tensor::from_values<int32_t>(Shape{1}, {-1});
  expect_run_refused_everywhere(spec_of("Pow", {zero.desc(), neg.desc()}), {zero, neg});
}

TEST(Elementwise, Variadic) {
  for (const char* type : {"Sum", "Mean", "Max", "Min"}) {
    check(type, random_inputs({f32({2, 3})}));
    check(type, random_inputs({f32({2, 3}), f32({3})}));
    check(type, random_inputs({f64({2, 1, 3}), f64({4, 1}), f64({})}));
  }
  for (const char* type : {"Max", "Min"})
    check(type, random_inputs({{DType::i32, Shape{5}}, {DType::i32, Shape{5}}}, -9, 9));
  // Ties: the whole gradient goes to the first input attaining the extreme; NaN wins.
  const auto a = Tensor::from_values<double>(Shape{4}, {1, 2, NAN, 0});
  const auto b = Tensor::from_values<double>(Shape{4}, {1, 3, 0, NAN});
  const auto c = Tensor::from_values<double>(Shape{4}, {1, 3, 5, 0});
  check("Max", {a, b, c});
  check("Min", {a, b, c});
  // Two f32 inputs with ties: the gradient goes to the first.
  const auto p = Tensor::from_values<float>(Shape{4}, {1, 2, 3, 4}), q = Tensor::from_values<float>(Shape{4}, {1, 5, 3, 0});
  check("Max", {p, q});
  check("Min", {p, q});
}

TEST(Elementwise, ComparisonsAndLogic) {
  const auto a = Tensor::from_values<float>(Shape{2, 3}, {1, 2, 3, NAN, 5, 6});
  const auto b = Tensor::from_values<float>(Shape{3}, {2, 2, NAN});
  for (const char* type : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    check(type, {a, b});
    check(type, random_inputs({{DType::i64, Shape{2, 4}}, {DType::i64, Shape{4}}}, -2, 2));
  }
  const auto p = Tensor::from_values<bool>(Shape{4}, {true, true, false, false});
  const auto q = Tensor::from_values<bool>(Shape{2, 1}, {true, false});
  for (const char* type : {"Equal", "And", "Or", "Xor"}) check(type, {p, q});
  check("Not", {p});
}

TEST(Elementwise, Where) {
  const auto cond = Tensor::from_values<bool>(Shape{2, 1, 3}, {true, false, true, false, false, true});
  check("Where", {cond, random_input(f32({4, 1}), "x"), random_input(f32({3}), "y")});
  check("Where", {cond, random_input(f64({2, 4, 3}), "x"), random_input(f64({}), "y")});
  check("Where", {cond, random_input({DType::i32, Shape{3}}, "x", -5, 5),
                  random_input({DType::i32, Shape{1}}, "y", -5, 5)});
}

TEST(Elementwise, Cast) {
  // ONNX 'to' codes: 1 float, 6 int32, 7 int64, 9 bool, 10 float16, 11 double, 16 bfloat16.
  const auto x = Tensor::from_values<float>(Shape{6}, {-2.7f, -0.5f, 0, 0.5f, 3.9f, 100});
  for (int64_t to : {1, 3, 6, 7, 9, 10, 11, 16}) check("Cast", {x}, {{"to", to}});
  check("Cast", {Tensor::from_values<float>(Shape{3}, {0.5f, 254.9f, 7})}, {{"to", int64_t{2}}});  // uint8
  const auto i = Tensor::from_values<int64_t>(Shape{3}, {-3, 0, 1 << 20});
  for (int64_t to : {1, 6, 9, 11}) check("Cast", {i}, {{"to", to}});
  check("Cast", {random_input(f64({2, 3}), "x")}, {{"to", int64_t{1}}}, Tolerance{1e-6, 1e-7});
}

// Running sums along an axis, every mode, in float and integer dtypes.
TEST(Elementwise, CumSum) {
  const auto axis = [](int64_t a) { return Tensor::from_values<int64_t>(Shape{}, {a}); };
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    const auto x = random_input({t, Shape{3, 4, 2}}, "x", -5, 5);
    for (int64_t a : {0, 1, -1})
      for (int64_t ex : {0, 1})
        for (int64_t rev : {0, 1}) check("CumSum", {x, axis(a)}, {{"exclusive", ex}, {"reverse", rev}});
  }
}

// Einstein summation: contractions, transposes, reductions, diagonals and broadcasting ellipses.
TEST(Elementwise, Einsum) {
  const auto eq = [](const char* e) { return Attributes{{"equation", std::string(e)}}; };
  for (DType t : {DType::f32, DType::f64}) {
    check("Einsum", random_inputs({{t, {2, 3}}, {t, {3, 4}}}), eq("ij,jk->ik"));
    check("Einsum", random_inputs({{t, {2, 3}}, {t, {3, 4}}}), eq("ij,jk"));
    check("Einsum", random_inputs({{t, {5, 2, 3}}, {t, {5, 3, 4}}}), eq("bij,bjk->bik"));
    check("Einsum", random_inputs({{t, {2, 3, 4}}}), eq("ijk->kji"));
    check("Einsum", random_inputs({{t, {2, 3, 4}}}), eq("ijk->j"));
    check("Einsum", random_inputs({{t, {4, 4}}}), eq("ii->i"));
    check("Einsum", random_inputs({{t, {4, 4}}}), eq("ii"));
    check("Einsum", random_inputs({{t, {3}}, {t, {4}}}), eq("i,j->ij"));
    check("Einsum", random_inputs({{t, {1, 2, 3}}, {t, {4, 3, 2}}}), eq("...ij,...jk->...ik"));
  }
}

}  // namespace d5::test
