// GatherElements, ScatterElements, TopK, Trilu and Range on the reference backend: values worked
// out by hand (the examples of ONNX's operator documentation among them), finite-difference
// gradients, and the specs and inputs they refuse.
#include <cmath>
#include <limits>

#include "op_test_util.h"

namespace d5::test {
namespace {

Tensor f64(const Shape& s, std::initializer_list<double> v) { return Tensor::from_values<double>(s, v); }
Tensor i64(const Shape& s, std::initializer_list<int64_t> v) { return Tensor::from_values<int64_t>(s, v); }

std::vector<TensorDesc> descs(const std::vector<Tensor>& in) {
  std::vector<TensorDesc> d;
  for (const auto& t : in) d.push_back(t.desc());
  return d;
}

// Runs an op whose inputs after the first `dynamic` ones are constants known at creation.
std::vector<Tensor> run_all(const std::string& type, const std::vector<Tensor>& in, Attributes attrs = {},
                            size_t dynamic = 99, int opset = 17) {
  std::vector<std::optional<Tensor>> known;
  for (size_t i = 0; i < in.size(); ++i) known.push_back(i >= dynamic ? std::optional<Tensor>(in[i]) : std::nullopt);
  OpSpec s = spec_of(type, descs(in), std::move(attrs), known);
  s.opset = opset;
  return make_op(s)->run_forward(in);
}
std::vector<double> run(const std::string& type, const std::vector<Tensor>& in, Attributes attrs = {},
                        size_t dynamic = 99) {
  return values(run_all(type, in, std::move(attrs), dynamic)[0]);
}

TEST(GatherElements, OnnxDocumentationExamples) {
  // axis 1: out[i][j] = data[i][indices[i][j]]
  EXPECT_EQ(run("GatherElements", {f64({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 0, 1, 0})}, {{"axis", int64_t{1}}}),
            (std::vector<double>{1, 1, 4, 3}));
  // axis 0: out[i][j] = data[indices[i][j]][j]
  const Tensor d = f64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(run("GatherElements", {d, i64({2, 3}, {1, 2, 0, 2, 0, 0})}), (std::vector<double>{4, 8, 3, 7, 2, 3}));
  // Negative indices count back; indices may be smaller than data on the other axes.
  const auto y = run_all("GatherElements", {d, Tensor::from_values<int32_t>(Shape{1, 2}, {-1, -3})});
  EXPECT_EQ(y[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{7, 2}));
}

TEST(GatherElements, RepeatedIndicesAddTheirGradientsAndBadSpecsAreRefused) {
  const Tensor data = f64({3}, {5, 6, 7});
  const Tensor idx = i64({4}, {0, 0, 2, -3});  // element 0 read three times
  auto op = make_op(spec_of("GatherElements", {data.desc(), idx.desc()}));
  EXPECT_EQ(values(op->run_forward(std::vector<Tensor>{data, idx})[0]), (std::vector<double>{5, 5, 7, 5}));
  const Tensor g = f64({4}, {1, 10, 100, 1000});
  const auto gx = op->run_backward(std::vector<Tensor>{g}, std::vector<Tensor>{data, idx}, {});
  EXPECT_EQ(values(gx[0]), (std::vector<double>{1011, 0, 100}));
  const Tensor r = random_tensor(DType::f64, {3, 4}, "ge");
  const Tensor ri = i64({2, 4}, {3, 0, 1, 1, -1, 2, 0, 3});
  auto op2 = make_op(spec_of("GatherElements", {r.desc(), ri.desc()}, {{"axis", int64_t{-1}}}));
  expect_gradient_ok(*op2, {r, ri});
  // An index past the axis, indices larger than data off the axis, a rank mismatch.
  EXPECT_THROW(op->run_forward(std::vector<Tensor>{data, i64({4}, {0, 3, 0, 0})}), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("GatherElements", {r.desc(), TensorDesc{DType::i64, Shape{2, 5}}})),
               InvalidArgument);
  EXPECT_THROW(make_op(spec_of("GatherElements", {r.desc(), TensorDesc{DType::i64, Shape{4}}})), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("GatherElements", {r.desc(), TensorDesc{DType::f32, Shape{2, 4}}})),
               InvalidArgument);
}

TEST(ScatterElements, OnnxDocumentationExamplesAndReductions) {
  const Tensor zeros = f64({3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(run("ScatterElements",
                {zeros, i64({2, 3}, {1, 0, 2, 0, 2, 1}), f64({2, 3}, {1.0, 1.1, 1.2, 2.0, 2.1, 2.2})}),
            (std::vector<double>{2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2}));
  EXPECT_EQ(run("ScatterElements", {f64({1, 5}, {1, 2, 3, 4, 5}), i64({1, 2}, {1, 3}), f64({1, 2}, {1.1, 2.1})},
                {{"axis", int64_t{1}}}),
            (std::vector<double>{1, 1.1, 3, 2.1, 5}));
  // Duplicates: none keeps the last write, add sums, mul multiplies (into data's value).
  const Tensor d = f64({5}, {1, 2, 3, 4, 5});
  const Tensor dup = i64({2}, {1, -4});
  const Tensor u = f64({2}, {1.5, 2.5});
  EXPECT_EQ(run("ScatterElements", {d, dup, u}), (std::vector<double>{1, 2.5, 3, 4, 5}));
  EXPECT_EQ(run("ScatterElements", {d, dup, u}, {{"reduction", std::string("add")}}),
            (std::vector<double>{1, 6, 3, 4, 5}));
  EXPECT_EQ(run("ScatterElements", {d, dup, u}, {{"reduction", std::string("mul")}}),
            (std::vector<double>{1, 7.5, 3, 4, 5}));
  EXPECT_EQ(values(run_all("ScatterElements", {i64({3}, {1, 2, 3}), i64({2}, {2, 2}), i64({2}, {10, 20})},
                           {{"reduction", std::string("add")}})[0]),
            (std::vector<double>{1, 2, 33}));
}

TEST(ScatterElements, GradientsOfEveryReductionAndRefusals) {
  const Tensor data = random_tensor(DType::f64, {3, 4}, "se-data", 0.5, 2);
  const Tensor idx = i64({2, 4}, {0, 2, 2, 1, 0, -1, 1, 1});  // (0,0) written twice
  const Tensor upd = random_tensor(DType::f64, {2, 4}, "se-upd", 0.5, 2);
  for (const char* r : {"none", "add", "mul"}) {
    SCOPED_TRACE(r);
    auto op = make_op(spec_of("ScatterElements", {data.desc(), idx.desc(), upd.desc()},
                              {{"reduction", std::string(r)}}));
    expect_gradient_ok(*op, {data, idx, upd});
  }
  // none: the overwritten element's gradient goes to the last write only.
  auto op = make_op(spec_of("ScatterElements", {TensorDesc{DType::f64, Shape{2}}, TensorDesc{DType::i64, Shape{2}},
                                                TensorDesc{DType::f64, Shape{2}}}));
  const std::vector<Tensor> in = {f64({2}, {1, 2}), i64({2}, {0, 0}), f64({2}, {3, 4})};
  op->run_forward(in);
  const auto g = op->run_backward(std::vector<Tensor>{f64({2}, {10, 20})}, in, {});
  EXPECT_EQ(values(g[0]), (std::vector<double>{0, 20}));
  EXPECT_EQ(values(g[2]), (std::vector<double>{0, 10}));
  EXPECT_THROW(make_op(spec_of("ScatterElements", {data.desc(), idx.desc(), upd.desc()},
                               {{"reduction", std::string("max")}})),
               InvalidArgument);
  EXPECT_THROW(make_op(spec_of("ScatterElements", {data.desc(), idx.desc(), TensorDesc{DType::f64, Shape{2, 3}}})),
               InvalidArgument);
  EXPECT_THROW(make_op(spec_of("ScatterElements", {data.desc(), idx.desc(), TensorDesc{DType::f32, Shape{2, 4}}})),
               InvalidArgument);
}

TEST(ScatterElements, MaxAndMinOfOpset18) {
  // Both updates name element 1 (index 1 and -4 of 5): y[1] = f(data[1], 1.5, 2.5).
  const Tensor d = f64({5}, {1, 2, 3, 4, 5});
  const Tensor dup = i64({2}, {1, -4});
  const Tensor u = f64({2}, {1.5, 2.5});
  auto at18 = [&](const char* r, const std::vector<Tensor>& in) {
    return values(run_all("ScatterElements", in, {{"reduction", std::string(r)}}, 99, 18)[0]);
  };
  EXPECT_EQ(at18("max", {d, dup, u}), (std::vector<double>{1, 2.5, 3, 4, 5}));
  EXPECT_EQ(at18("min", {d, dup, u}), (std::vector<double>{1, 1.5, 3, 4, 5}));
  // data takes part: an update below data[q] leaves it under max.
  EXPECT_EQ(at18("max", {d, i64({1}, {4}), f64({1}, {-7})}), (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(values(run_all("ScatterElements", {i64({3}, {1, 9, 3}), i64({2}, {1, 1}), i64({2}, {4, 12})},
                           {{"reduction", std::string("min")}}, 99, 18)[0]),
            (std::vector<double>{1, 4, 3}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(at18("max", {d, i64({2}, {0, 0}), f64({2}, {nan, 0})})[0]));  // NaN propagates
  // Before opset 18 the names are refused, with the opset that brought them.
  try {
    run_all("ScatterElements", {d, dup, u}, {{"reduction", std::string("max")}}, 99, 17);
    ADD_FAILURE() << "max was accepted at opset 17";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("came in opset 18"), std::string::npos) << e.what();
  }
}

TEST(ScatterElements, MaxAndMinGradientsGoToTheExtremeTiesShared) {
  const Tensor data = random_tensor(DType::f64, {3, 4}, "se-data", 0.5, 2);
  const Tensor idx = i64({2, 4}, {0, 2, 2, 1, 0, -1, 1, 1});  // (0,0) written twice
  const Tensor upd = random_tensor(DType::f64, {2, 4}, "se-upd", 0.5, 2);
  for (const char* r : {"max", "min"}) {
    SCOPED_TRACE(r);
    OpSpec s = spec_of("ScatterElements", {data.desc(), idx.desc(), upd.desc()}, {{"reduction", std::string(r)}});
    s.opset = 18;
    expect_gradient_ok(*make_op(s), {data, idx, upd});
  }
  // y[0] = max(2, 2, 1): data and the first update tie and share g; the smaller update gets none.
  OpSpec s = spec_of("ScatterElements", {TensorDesc{DType::f64, Shape{2}}, TensorDesc{DType::i64, Shape{2}},
                                         TensorDesc{DType::f64, Shape{2}}},
                     {{"reduction", std::string("max")}});
  s.opset = 18;
  auto op = make_op(s);
  const std::vector<Tensor> in = {f64({2}, {2, 7}), i64({2}, {0, 0}), f64({2}, {2, 1})};
  op->run_forward(in);
  const auto g = op->run_backward(std::vector<Tensor>{f64({2}, {10, 20})}, in, {});
  EXPECT_EQ(values(g[0]), (std::vector<double>{5, 20}));
  EXPECT_EQ(values(g[2]), (std::vector<double>{5, 0}));
}

TEST(TopK, LargestSmallestTiesAndNaN) {
  Tensor x = f64({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto y = run_all("TopK", {x, i64({1}, {3})}, {}, 1);
  EXPECT_EQ(y[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{3, 2, 1, 7, 6, 5, 11, 10, 9}));
  EXPECT_EQ(y[1].dtype(), DType::i64);
  EXPECT_EQ(values(y[1]), (std::vector<double>{3, 2, 1, 3, 2, 1, 3, 2, 1}));
  y = run_all("TopK", {x, i64({1}, {2})}, {{"largest", int64_t{0}}, {"axis", int64_t{0}}}, 1);
  EXPECT_EQ(values(y[0]), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(values(y[1]), (std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1}));
  // Equal values: the lower index first.
  y = run_all("TopK", {f64({4}, {1, 3, 3, 2}), i64({1}, {2})}, {}, 1);
  EXPECT_EQ(values(y[1]), (std::vector<double>{1, 2}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  y = run_all("TopK", {f64({3}, {1, nan, 3}), i64({1}, {2})}, {}, 1);
  EXPECT_TRUE(std::isnan(values(y[0])[0]));
  EXPECT_EQ(values(y[1]), (std::vector<double>{1, 2}));
  y = run_all("TopK", {f64({3}, {1, nan, 3}), i64({1}, {3})}, {{"largest", int64_t{0}}}, 1);
  EXPECT_EQ(values(y[1]), (std::vector<double>{0, 2, 1}));
  // Opset 1: K is an attribute.
  OpSpec s1 = spec_of("TopK", {x.desc()}, {{"k", int64_t{1}}});
  s1.opset = 1;
  EXPECT_EQ(values(make_op(s1)->run_forward(std::vector<Tensor>{x})[0]), (std::vector<double>{3, 7, 11}));
  // Integers sort too.
  EXPECT_EQ(values(run_all("TopK", {Tensor::from_values<int32_t>(Shape{4}, {-5, 9, 0, 9}), i64({1}, {2})}, {}, 1)[1]),
            (std::vector<double>{1, 3}));
}

TEST(TopK, GradientReachesTheSelectedElementsAndBadSpecsAreRefused) {
  const Tensor x = random_tensor(DType::f64, {2, 5, 3}, "topk");
  const Tensor k = i64({1}, {3});
  for (int64_t largest : {0, 1}) {
    auto op = make_op(spec_of("TopK", {x.desc(), k.desc()}, {{"axis", int64_t{1}}, {"largest", largest}},
                              {std::nullopt, k}));
    expect_gradient_ok(*op, {x, k});
  }
  auto op = make_op(spec_of("TopK", {TensorDesc{DType::f64, Shape{4}}, k.desc()}, {}, {std::nullopt, k}));
  const std::vector<Tensor> in = {f64({4}, {4, 1, 3, 2}), k};
  const auto out = op->run_forward(in);
  const auto g = op->run_backward(std::vector<Tensor>{f64({3}, {10, 20, 30}), Tensor()}, in, out);
  EXPECT_EQ(values(g[0]), (std::vector<double>{10, 0, 20, 30}));
  EXPECT_THROW(make_op(spec_of("TopK", {x.desc(), k.desc()})), InvalidArgument);  // K not known
  EXPECT_THROW(make_op(spec_of("TopK", {x.desc(), k.desc()}, {}, {std::nullopt, i64({1}, {4})})), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("TopK", {x.desc(), k.desc()}, {}, {std::nullopt, i64({1}, {-1})})), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("TopK", {TensorDesc{DType::f16, Shape{4}}, k.desc()}, {}, {std::nullopt, k})),
               InvalidArgument);
}

TEST(Trilu, UpperLowerOffsetsAndBatches) {
  const Tensor x = f64({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(run("Trilu", {x}), (std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_EQ(run("Trilu", {x, i64({}, {1})}, {}, 1), (std::vector<double>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_EQ(run("Trilu", {x, i64({}, {-1})}, {{"upper", int64_t{0}}}, 1),
            (std::vector<double>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_EQ(run("Trilu", {x}, {{"upper", int64_t{0}}}), (std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  // Offsets past the matrix keep everything or nothing; the extremes of int64 do not overflow.
  EXPECT_EQ(run("Trilu", {x, i64({}, {5})}, {}, 1), std::vector<double>(12, 0.0));
  EXPECT_EQ(run("Trilu", {x, i64({}, {std::numeric_limits<int64_t>::min()})}, {}, 1), values(x));
  // Every matrix of a batch; k known only at run time; integer dtypes.
  const Tensor b = Tensor::from_values<int32_t>(Shape{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(run("Trilu", {b, i64({}, {0})}, {{"upper", int64_t{0}}}, 2), (std::vector<double>{1, 0, 3, 4, 5, 0, 7, 8}));
}

TEST(Trilu, GradientIsTheMaskAndBadSpecsAreRefused) {
  const Tensor x = random_tensor(DType::f64, {2, 3, 4}, "trilu");
  for (int64_t upper : {0, 1}) {
    auto op = make_op(spec_of("Trilu", {x.desc(), TensorDesc{DType::i64, Shape{}}}, {{"upper", upper}}));
    expect_gradient_ok(*op, {x, i64({}, {1})});
  }
  EXPECT_THROW(make_op(spec_of("Trilu", {TensorDesc{DType::f64, Shape{4}}})), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("Trilu", {x.desc(), TensorDesc{DType::i32, Shape{}}})), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("Trilu", {})), InvalidArgument);
}

TEST(Range, LengthsAndValues) {
  const auto i32 = [](int32_t v) { return Tensor::from_values<int32_t>(Shape{}, {v}); };
  const auto f32 = [](float v) { return Tensor::from_values<float>(Shape{}, {v}); };
  EXPECT_EQ(run("Range", {i32(1), i32(10), i32(3)}, {}, 0), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(run("Range", {i32(10), i32(4), i32(-3)}, {}, 0), (std::vector<double>{10, 7}));
  EXPECT_TRUE(run("Range", {i32(5), i32(1), i32(1)}, {}, 0).empty());
  // ceil(1 / 0.3) = 4 elements.
  const auto f = run("Range", {f32(1), f32(2), f32(0.3f)}, {}, 0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_NEAR(f[3], 1.9, 1e-6);
  // int64's extremes: 3 * 2^62 does not fit in int64, the values do.
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const int64_t q = int64_t{1} << 62;
  const auto big = run_all("Range", {i64({}, {lo}), i64({}, {hi}), i64({}, {q})}, {}, 0)[0];
  ASSERT_EQ(big.numel(), 4);
  const int64_t* v = big.data_as<int64_t>();
  EXPECT_EQ(v[0], lo);
  EXPECT_EQ(v[1], -q);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], q);
}

TEST(Range, RefusesWhatHasNoStaticLengthOrNoEnd) {
  const auto f32 = [](float v) { return Tensor::from_values<float>(Shape{}, {v}); };
  const TensorDesc s{DType::f32, Shape{}};
  EXPECT_THROW(make_op(spec_of("Range", {s, s, s})), InvalidArgument);  // values unknown at creation
  EXPECT_THROW(run("Range", {f32(0), f32(1), f32(0)}, {}, 0), InvalidArgument);
  EXPECT_THROW(run("Range", {f32(0), f32(1e30f), f32(1e-30f)}, {}, 0), InvalidArgument);  // 10^60 elements
  EXPECT_THROW(run("Range", {f32(0), f32(std::numeric_limits<float>::infinity()), f32(1)}, {}, 0), InvalidArgument);
  EXPECT_THROW(run("Range", {f32(0), Tensor::from_values<double>(Shape{}, {1.0}), f32(1)}, {}, 0), InvalidArgument);
  auto op = make_op(spec_of("Range", {s, s, s}, {}, {f32(0), f32(3), f32(1)}));
  EXPECT_FALSE(op->has_gradient());
  EXPECT_NE(op->no_gradient_reason().find("constants"), std::string::npos);
}

}  // namespace
}  // namespace d5::test
