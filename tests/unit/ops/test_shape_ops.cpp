// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape, Constant and ConstantOfShape (reference backend).
#include <cmath>

#include "movement_test_util.h"

namespace d5::test {

namespace {
std::vector<double> range(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i));
  return v;
}
}  // namespace

TEST(Reshape, InfersMinusOneAndCopiesZeros) {
  const Tensor x = iota(DType::f32, Shape{2, 3, 4});
  auto b = build("Reshape", {x}, {i64s({4, -1})});
  EXPECT_EQ(b.out_shape(), (Shape{4, 6}));  // 24 / 4
  EXPECT_EQ(b.out(), range(24));            // row-major data is unchanged
  // allowzero=0: a 0 copies the input's extent at that position.
  EXPECT_EQ(build("Reshape", {x}, {i64s({0, -1})}).out_shape(), (Shape{2, 12}));
  EXPECT_EQ(build("Reshape", {x}, {i64s({0, 0, 2, 2})}).out_shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(build("Reshape", {x}, {i64s({-1})}).out_shape(), (Shape{24}));
  // allowzero=1: a 0 is a literal empty extent.
  const Tensor empty = iota(DType::f32, Shape{0, 3});
  EXPECT_EQ(build("Reshape", {empty}, {i64s({3, 0})}, {{"allowzero", int64_t{1}}}).out_shape(), (Shape{3, 0}));
  // Before opset 5 the shape is an attribute.
  EXPECT_EQ(build("Reshape", {x}, {}, {{"shape", std::vector<int64_t>{6, 4}}}, 4).out_shape(), (Shape{6, 4}));
}

TEST(Reshape, EveryDtypeIsABitCopy) {
  for (DType t : kAllDTypes) {
    const Tensor x = iota(t, Shape{2, 3});
    auto b = build("Reshape", {x}, {i64s({3, 2})});
    EXPECT_EQ(b.out(), values(x)) << to_string(t);
  }
}

TEST(Reshape, Errors) {
  const Tensor x = iota(DType::f32, Shape{2, 3, 4});
  expect_invalid("Reshape", "more than one -1", [&] { build("Reshape", {x}, {i64s({-1, -1})}); });
  expect_invalid("Reshape", "cannot reshape", [&] { build("Reshape", {x}, {i64s({5, 5})}); });
  expect_invalid("Reshape", "cannot infer", [&] { build("Reshape", {x}, {i64s({7, -1})}); });
  expect_invalid("Reshape", "invalid extent -3", [&] { build("Reshape", {x}, {i64s({2, -3, -4})}); });
  expect_invalid("Reshape", "allowzero", [&] {
    build("Reshape", {x}, {i64s({0, -1})}, {{"allowzero", int64_t{1}}});
  });
  expect_invalid("Reshape", "rank 3", [&] { build("Reshape", {x}, {i64s({1, 1, 1, 0})}); });
  // The shape must be known when the op is created.
  OpSpec s = spec_of("Reshape", {x.desc(), TensorDesc{DType::i64, Shape{2}}});
  expect_invalid("Reshape", "must be a constant", [&] { make_op(s); });
  expect_invalid("Reshape", "int64", [&] {
    build("Reshape", {x}, {Tensor::from_values<float>(Shape{2}, {4, 6})});
  });
}

TEST(Reshape, Gradient) {
  auto b = build("Reshape", {random_tensor(DType::f64, Shape{2, 6}, "reshape")}, {i64s({3, -1, 2})});
  EXPECT_EQ(b.op->differentiable_inputs(), (std::vector<bool>{true, false}));
  expect_gradient_ok(*b.op, b.inputs);
  // Integer data has no gradient, and says why.
  auto bi = build("Reshape", {iota(DType::i32, Shape{4})}, {i64s({2, 2})});
  EXPECT_FALSE(bi.op->has_gradient());
  EXPECT_NE(bi.op->no_gradient_reason().find("i32"), std::string::npos);
}

TEST(Flatten, Axes) {
  const Tensor x = iota(DType::f32, Shape{2, 3, 4});
  auto flat = [&](int64_t axis) { return build("Flatten", {x}, {}, {{"axis", axis}}).out_shape(); };
  EXPECT_EQ(build("Flatten", {x}).out_shape(), (Shape{2, 12}));  // default axis 1
  EXPECT_EQ(flat(0), (Shape{1, 24}));
  EXPECT_EQ(flat(2), (Shape{6, 4}));
  EXPECT_EQ(flat(3), (Shape{24, 1}));
  EXPECT_EQ(flat(-1), (Shape{6, 4}));
  EXPECT_EQ(flat(-3), (Shape{1, 24}));
  EXPECT_EQ(build("Flatten", {x}, {}, {{"axis", int64_t{2}}}).out(), range(24));
  // An empty leading extent keeps the trailing product.
  EXPECT_EQ(build("Flatten", {iota(DType::f32, Shape{0, 3})}).out_shape(), (Shape{0, 3}));
  expect_invalid("Flatten", "axis 4", [&] { flat(4); });
  expect_invalid("Flatten", "axis -4", [&] { flat(-4); });
  auto g = build("Flatten", {random_tensor(DType::f64, Shape{2, 2, 3}, "flatten")}, {}, {{"axis", int64_t{2}}});
  expect_gradient_ok(*g.op, g.inputs);
}

TEST(Squeeze, AllOnesOrListedAxes) {
  const Tensor x = iota(DType::i64, Shape{1, 3, 1, 2});
  EXPECT_EQ(build("Squeeze", {x}).out_shape(), (Shape{3, 2}));
  EXPECT_EQ(build("Squeeze", {x}, {i64s({-2})}).out_shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(build("Squeeze", {x}, {i64s({2, 0})}).out_shape(), (Shape{3, 2}));
  // Before opset 13 the axes are an attribute.
  auto old = build("Squeeze", {x}, {}, {{"axes", std::vector<int64_t>{0}}}, 11);
  EXPECT_EQ(old.out_shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(old.out(), range(6));
  EXPECT_EQ(build("Squeeze", {iota(DType::f32, Shape{1})}).out_shape(), Shape{});  // to a scalar
  expect_invalid("Squeeze", "extent is 3", [&] { build("Squeeze", {x}, {i64s({1})}); });
  expect_invalid("Squeeze", "twice", [&] { build("Squeeze", {x}, {i64s({0, -4})}); });
  expect_invalid("Squeeze", "out of range", [&] { build("Squeeze", {x}, {i64s({4})}); });
  auto g = build("Squeeze", {random_tensor(DType::f64, Shape{3, 1}, "squeeze")}, {i64s({1})});
  expect_gradient_ok(*g.op, g.inputs);
}

TEST(Unsqueeze, InsertsAxesOfTheOutputRank) {
  const Tensor x = iota(DType::f32, Shape{3, 2});
  EXPECT_EQ(build("Unsqueeze", {x}, {i64s({0, -1})}).out_shape(), (Shape{1, 3, 2, 1}));
  EXPECT_EQ(build("Unsqueeze", {x}, {i64s({1})}).out_shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(build("Unsqueeze", {x}, {i64s({3, 1})}).out_shape(), (Shape{3, 1, 2, 1}));
  EXPECT_EQ(build("Unsqueeze", {iota(DType::f32, Shape{})}, {i64s({0})}).out_shape(), (Shape{1}));
  auto old = build("Unsqueeze", {x}, {}, {{"axes", std::vector<int64_t>{0}}}, 11);
  EXPECT_EQ(old.out_shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(old.out(), range(6));
  expect_invalid("Unsqueeze", "out of range", [&] { build("Unsqueeze", {x}, {i64s({3})}); });
  expect_invalid("Unsqueeze", "twice", [&] { build("Unsqueeze", {x}, {i64s({1, 1})}); });
  expect_invalid("Unsqueeze", "axes", [&] { build("Unsqueeze", {x}); });
  auto g = build("Unsqueeze", {random_tensor(DType::f64, Shape{3, 2}, "unsqueeze")}, {i64s({1})});
  expect_gradient_ok(*g.op, g.inputs);
}

TEST(Identity, CopiesEveryDtypeAndPassesTheGradient) {
  for (DType t : kAllDTypes) {
    const Tensor x = iota(t, Shape{5}, 1);
    EXPECT_EQ(build("Identity", {x}).out(), values(x)) << to_string(t);
  }
  auto g = build("Identity", {random_tensor(DType::f64, Shape{4}, "identity")});
  expect_gradient_ok(*g.op, g.inputs);
  // An absent upstream gradient means zero.
  const std::vector<Tensor> gy(1);
  EXPECT_EQ(values(g.op->run_backward(gy, g.inputs, g.run())[0]), (std::vector<double>{0, 0, 0, 0}));
}

TEST(ShapeOp, StartEndAndNoGradient) {
  const Tensor x = iota(DType::f32, Shape{2, 3, 4});
  auto shape_of = [&](Attributes a) {
    auto b = build("Shape", {x}, {}, std::move(a));
    EXPECT_EQ(b.op->output_descs()[0].dtype, DType::i64);
    return b.out();
  };
  EXPECT_EQ(shape_of({}), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(shape_of({{"start", int64_t{1}}}), (std::vector<double>{3, 4}));
  EXPECT_EQ(shape_of({{"end", int64_t{-1}}}), (std::vector<double>{2, 3}));
  EXPECT_EQ(shape_of({{"start", int64_t{-10}}, {"end", int64_t{10}}}),
            (std::vector<double>{2, 3, 4}));  // clamped
  EXPECT_EQ(shape_of({{"start", int64_t{2}}, {"end", int64_t{1}}}), std::vector<double>{});
  EXPECT_EQ(build("Shape", {iota(DType::boolean, Shape{})}).out_shape(), (Shape{0}));
  auto b = build("Shape", {x});
  EXPECT_FALSE(b.op->has_gradient());
  EXPECT_NE(b.op->no_gradient_reason().find("shape"), std::string::npos);
}

TEST(Constant, EachValueAttribute) {
  auto value = [](Attributes a) { return build("Constant", {}, {}, std::move(a)); };
  auto t = value({{"value", Tensor::from_values<int32_t>(Shape{2}, {7, -3})}});
  EXPECT_EQ(t.op->output_descs()[0], (TensorDesc{DType::i32, Shape{2}}));
  EXPECT_EQ(t.out(), (std::vector<double>{7, -3}));
  auto f = value({{"value_float", 1.5}});
  EXPECT_EQ(f.op->output_descs()[0], (TensorDesc{DType::f32, Shape{}}));
  EXPECT_EQ(f.out(), (std::vector<double>{1.5}));
  auto fs = value({{"value_floats", std::vector<double>{0.25, -2}}});
  EXPECT_EQ(fs.out_shape(), (Shape{2}));
  EXPECT_EQ(fs.out(), (std::vector<double>{0.25, -2}));
  auto i = value({{"value_int", int64_t{-9}}});
  EXPECT_EQ(i.op->output_descs()[0], (TensorDesc{DType::i64, Shape{}}));
  EXPECT_EQ(i.out(), (std::vector<double>{-9}));
  EXPECT_EQ(value({{"value_ints", std::vector<int64_t>{4, 5, 6}}}).out(), (std::vector<double>{4, 5, 6}));
  EXPECT_FALSE(i.op->has_gradient());

  expect_invalid("Constant", "none", [&] { value({}); });
  expect_invalid("Constant", "value_float", [&] { value({{"value_int", int64_t{1}}, {"value_float", 1.0}}); });
  expect_invalid("Constant", "value_string", [&] { value({{"value_string", std::string("a")}}); });
}

TEST(ConstantOfShape, FillsTheShapeWithTheValuesDtype) {
  const auto shape = Tensor::from_values<int64_t>(Shape{2}, {2, 3});
  auto zeros = build("ConstantOfShape", {}, {shape});
  EXPECT_EQ(zeros.op->output_descs()[0], (TensorDesc{DType::f32, Shape{2, 3}}));
  EXPECT_EQ(zeros.out(), std::vector<double>(6, 0.0));
  EXPECT_FALSE(zeros.op->has_gradient());
  auto sevens = build("ConstantOfShape", {}, {shape}, {{"value", Tensor::from_values<int32_t>(Shape{1}, {7})}});
  EXPECT_EQ(sevens.op->output_descs()[0].dtype, DType::i32);
  EXPECT_EQ(sevens.out(), std::vector<double>(6, 7.0));
  auto empty = build("ConstantOfShape", {}, {Tensor::from_values<int64_t>(Shape{2}, {0, 4})});
  EXPECT_EQ(empty.out_shape(), (Shape{0, 4}));

  expect_invalid("ConstantOfShape", "negative", [&] {
    build("ConstantOfShape", {}, {Tensor::from_values<int64_t>(Shape{1}, {-1})});
  });
  expect_invalid("ConstantOfShape", "one element", [&] {
    build("ConstantOfShape", {}, {shape}, {{"value", Tensor::from_values<float>(Shape{2}, {1, 2})}});
  });
}

}  // namespace d5::test
