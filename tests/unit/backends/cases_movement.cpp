// Shared cases: shape and data-movement ops against the reference, for several dtypes (they move bytes,
// so every dtype must come out bit-identical).
#include "shared_cases.h"

namespace d5::test {

namespace {

// An op whose inputs after the first are constants (shapes, axes, pads): known to the spec.
void check_const(const std::string& type, const Tensor& x, const std::vector<Tensor>& consts,
                 Attributes attrs = {}, int opset = 17) {
  std::vector<TensorDesc> descs = {x.desc()};
  std::vector<std::optional<Tensor>> values = {std::nullopt};
  std::vector<Tensor> inputs = {x};
  std::vector<bool> present = {true};
  for (const auto& c : consts) {
    descs.push_back(c.defined() ? c.desc() : TensorDesc{});
    values.push_back(c.defined() ? std::optional<Tensor>(c) : std::nullopt);
    inputs.push_back(c);
    present.push_back(c.defined());
  }
  OpSpec s = spec_of(type, descs, std::move(attrs), values);
  s.opset = opset;
  s.present = present;
  check_spec(s, inputs);
}

const DType kTypes[] = {DType::f32, DType::f64, DType::i32, DType::u8, DType::f16};

}  // namespace

TEST(Movement, ReshapeFamily) {
  for (DType t : kTypes) {
    const auto x = random_input({t, Shape{2, 3, 4}}, "x", 0, 9);
    check_const("Reshape", x, {i64s({4, -1})});
    check_const("Reshape", x, {i64s({0, 12})});
    check("Flatten", {x}, {{"axis", int64_t{2}}});
    check("Flatten", {x}, {{"axis", int64_t{0}}});
    check("Identity", {x});
    const auto y = random_input({t, Shape{2, 1, 3, 1}}, "y", 0, 9);
    check("Squeeze", {y});
    check_const("Squeeze", y, {i64s({-1})});
    check_const("Unsqueeze", x, {i64s({0, 4})});
    check("Unsqueeze", {x}, {{"axes", std::vector<int64_t>{1}}}, std::nullopt, 11);
  }
}

TEST(Movement, Transpose) {
  for (DType t : kTypes) {
    const auto x = random_input({t, Shape{2, 3, 4}}, "x", 0, 9);
    check("Transpose", {x});
    check("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    check("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  }
}

TEST(Movement, Slice) {
  for (DType t : {DType::f32, DType::f64, DType::i64}) {
    const auto x = random_input({t, Shape{5, 6, 3}}, "x", 0, 9);
    check_const("Slice", x, {i64s({1, 0}), i64s({4, 100})});
    check_const("Slice", x, {i64s({-2}), i64s({INT64_MAX}), i64s({1})});
    check_const("Slice", x, {i64s({4, 5}), i64s({0, -100}), i64s({0, 1}), i64s({-2, -1})});  // negative steps
    check_const("Slice", x, {i64s({0, 1}), i64s({5, 6}), i64s({-1, 1}), i64s({2, 3})});
    check_const("Slice", x, {i64s({3}), i64s({1}), i64s({0})});  // empty
    check("Slice", {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{3}}},
          std::nullopt, 9);
  }
}

TEST(Movement, Pad) {
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    const auto x = random_input({t, Shape{2, 3, 4}}, "x", 0, 9);
    for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
      const Attributes a{{"mode", std::string(mode)}};
      check_const("Pad", x, {i64s({0, 1, 2, 1, 0, 3})}, a);
      check_const("Pad", x, {i64s({1, -1, 0, 0, 1, -2})}, a);         // negative pads crop
      check_const("Pad", x, {i64s({5, 7}), Tensor(), i64s({2})}, a);  // wider than the axis; opset 18 axes
    }
    Tensor v(t, Shape{});
    v.set(0, 7);
    check_const("Pad", x, {i64s({1, 1, 1, 1, 1, 1}), v});
    check("Pad", {x}, {{"pads", std::vector<int64_t>{0, 2, 0, 1, 0, 0}}, {"value", 2.5}}, std::nullopt, 2);
  }
}

// The output's shape is the input's value; its element, the attribute's (f32 zero without one).
TEST(Movement, ConstantOfShape) {
  const Tensor shape = i64s({2, 3, 4});
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    Tensor fill(TensorDesc{t, Shape{1}});
    fill.set(0, 3);
    check_spec(spec_of("ConstantOfShape", {shape.desc()}, Attributes{{"value", fill}}, {shape}), {shape});
  }
  check_spec(spec_of("ConstantOfShape", {shape.desc()}, {}, {shape}), {shape});
  const Tensor empty = i64s({0, 5});
  check_spec(spec_of("ConstantOfShape", {empty.desc()}, {}, {empty}), {empty});
}

TEST(Movement, Expand) {
  for (DType t : kTypes) {
    const auto x = random_input({t, Shape{3, 1}}, "x", 0, 9);
    check_const("Expand", x, {i64s({2, 3, 4})});
    check_const("Expand", x, {i64s({1, 1})});
    check_const("Expand", x, {i64s({3, 5})});
  }
}

TEST(Movement, ConcatAndSplit) {
  for (DType t : kTypes) {
    const auto a = random_input({t, Shape{2, 3}}, "a", 0, 9), b = random_input({t, Shape{2, 1}}, "b", 0, 9),
               c = random_input({t, Shape{2, 0}}, "c", 0, 9);
    check("Concat", {a, b, c}, {{"axis", int64_t{1}}});
    check("Concat", {a, a}, {{"axis", int64_t{-2}}});
    for (int64_t axis : {0, 1, 2, -1}) {  // three inputs along every axis of a 3-D tensor
      std::vector<Tensor> parts;
      for (int64_t k : {1, 3, 2}) {
        std::vector<int64_t> d = {2, 4, 5};
        d[static_cast<size_t>(axis < 0 ? axis + 3 : axis)] = k;
        parts.push_back(random_input({t, Shape(d)}, "part", 0, 9));
      }
      check("Concat", parts, {{"axis", axis}});
    }
    check("Concat", {random_input({t, Shape{6}}, "one", 0, 9)}, {{"axis", int64_t{0}}});
    const auto x = random_input({t, Shape{6, 4}}, "x", 0, 9);
    check_const("Split", x, {i64s({1, 0, 5})});
    check("Split", {x}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}, std::nullopt, 18);
    OpSpec s = spec_of("Split", {x.desc()}, {{"axis", int64_t{0}}});
    s.num_outputs = 3;
    check_spec(s, {x});
  }
}

TEST(Movement, Gather) {
  for (DType t : kTypes) {
    const auto x = random_input({t, Shape{4, 3, 2}}, "x", 0, 9);
    check("Gather", {x, Tensor::from_values<int64_t>(Shape{2, 2}, {0, -1, 3, 0})});  // repeats add up
    check("Gather", {x, Tensor::from_values<int32_t>(Shape{}, {2})}, {{"axis", int64_t{1}}});
    check("Gather", {x, Tensor::from_values<int32_t>(Shape{3}, {1, 1, -2})}, {{"axis", int64_t{-1}}});
  }
  const auto x = random_input({DType::f32, Shape{4}}, "x");
  const auto bad = Tensor::from_values<int64_t>(Shape{1}, {4});
  expect_run_refused_everywhere(spec_of("Gather", {x.desc(), bad.desc()}), {x, bad});
}

TEST(Movement, ElementIndexing) {
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    const auto x = random_input({t, Shape{3, 4}}, "x", 0, 9);
    const auto idx = Tensor::from_values<int64_t>(Shape{2, 4}, {0, 2, 2, 1, 0, -1, 1, 1});  // (0, 0) twice
    check("GatherElements", {x, idx});
    check("GatherElements", {x, Tensor::from_values<int32_t>(Shape{3, 2}, {3, 0, -1, 2, 1, 1})}, {{"axis", int64_t{1}}});
    const auto upd = random_input({t, Shape{2, 4}}, "u", 0, 9);
    check("ScatterElements", {x, Tensor::from_values<int64_t>(Shape{2, 4}, {0, 2, 1, 1, 1, 0, 2, 0}), upd});
    check("ScatterElements", {x, idx, upd}, {{"reduction", std::string("add")}}, std::nullopt, 16);
    check("ScatterElements", {x, idx, upd}, {{"reduction", std::string("mul")}}, std::nullopt, 16);
    check("ScatterElements", {x, idx, upd}, {{"reduction", std::string("max")}}, std::nullopt, 18);
    check("ScatterElements", {x, idx, upd}, {{"reduction", std::string("min")}}, std::nullopt, 18);
  }
  const auto x = random_input({DType::f32, Shape{4}}, "x");
  const auto bad = Tensor::from_values<int64_t>(Shape{1}, {4});
  expect_run_refused_everywhere(spec_of("GatherElements", {x.desc(), bad.desc()}), {x, bad});
}

TEST(Movement, TopKTriluRange) {
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    const auto x = random_input({t, Shape{2, 5, 3}}, "x", -9, 9);
    check_const("TopK", x, {i64s({3})}, {{"axis", int64_t{1}}});
    check_const("TopK", x, {i64s({2})}, {{"largest", int64_t{0}}});
    check("Trilu", {x});
    check("Trilu", {x, Tensor::from_values<int64_t>(Shape{}, {-1})}, {{"upper", int64_t{0}}});
  }
  // Range: every input decides the length, so all three are known to the spec.
  const auto range = [](const std::vector<Tensor>& in) {
    check_spec(spec_of("Range", {in[0].desc(), in[1].desc(), in[2].desc()}, {}, {in[0], in[1], in[2]}), in);
  };
  const auto f = [](float v) { return Tensor::from_values<float>(Shape{}, {v}); };
  range({f(1), f(4), f(0.5f)});
  const auto i = [](int64_t v) { return Tensor::from_values<int64_t>(Shape{}, {v}); };
  range({i(10), i(-3), i(-4)});
}

TEST(Movement, ShapeAndConstant) {
  const auto x = random_input({DType::f32, Shape{2, 3, 4, 5}}, "x");
  check("Shape", {x});
  check("Shape", {x}, {{"start", int64_t{1}}, {"end", int64_t{-1}}}, std::nullopt, 15);
  check("Shape", {x}, {{"start", int64_t{-10}}, {"end", int64_t{2}}}, std::nullopt, 15);
  check("Constant", {}, {{"value", Tensor::from_values<double>(Shape{2, 2}, {1, 2, 3, 4})}});
  check("Constant", {}, {{"value_float", 2.5}});
  check("Constant", {}, {{"value_ints", std::vector<int64_t>{3, -1}}});
  check("Constant", {}, {{"value_floats", std::vector<double>{0.5, 1}}});
  check("Constant", {}, {{"value_int", int64_t{9}}});
}

}  // namespace d5::test
