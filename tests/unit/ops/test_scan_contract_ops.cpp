// Erf, Mish, CumSum and Einsum on the reference backend: hand-derived values, finite-difference
// gradients, and the specs they refuse.
#include <cmath>

#include "op_test_util.h"

namespace d5::test {
namespace {

Tensor f64(const Shape& s, std::initializer_list<double> v) { return Tensor::from_values<double>(s, v); }
Tensor axis(int64_t a) { return Tensor::from_values<int64_t>(Shape{}, {a}); }

std::vector<double> run(const std::string& type, const std::vector<Tensor>& in, Attributes attrs = {}) {
  std::vector<TensorDesc> d;
  for (const auto& t : in) d.push_back(t.desc());
  auto op = make_op(spec_of(type, d, std::move(attrs)));
  return values(op->run_forward(in)[0]);
}

TEST(ErfMish, KnownValuesAndGradients) {
  const Tensor x = f64({4}, {-1.5, 0.0, 0.5, 2.0});
  const auto erf = run("Erf", {x});
  // erf from Abramowitz & Stegun's table 7.1 (10 digits).
  EXPECT_NEAR(erf[0], -0.9661051465, 1e-10);
  EXPECT_EQ(erf[1], 0.0);
  EXPECT_NEAR(erf[2], 0.5204998778, 1e-10);
  EXPECT_NEAR(erf[3], 0.9953222650, 1e-10);
  // Mish(x) = x tanh(ln(1 + e^x)): Mish(2) = 2 tanh(ln(1 + e^2)) = 1.9439589595 (ln(1 + e^2) =
  // 2.1269280110, tanh of it = 0.9719794798).
  const auto mish = run("Mish", {x});
  EXPECT_NEAR(mish[3], 2 * std::tanh(std::log1p(std::exp(2.0))), 1e-14);
  EXPECT_NEAR(mish[3], 1.9439589595, 1e-9);
  EXPECT_EQ(mish[1], 0.0);
  for (const char* type : {"Erf", "Mish"}) {
    const Tensor r = random_tensor(DType::f64, {3, 4}, type, -3, 3);
    auto op = make_op(spec_of(type, {r.desc()}));
    expect_gradient_ok(*op, {r});
  }
}

TEST(CumSum, EveryModeOnOneAxis) {
  const Tensor x = f64({4}, {1, 2, 3, 4});
  EXPECT_EQ(run("CumSum", {x, axis(0)}), (std::vector<double>{1, 3, 6, 10}));
  EXPECT_EQ(run("CumSum", {x, axis(0)}, {{"exclusive", int64_t{1}}}), (std::vector<double>{0, 1, 3, 6}));
  EXPECT_EQ(run("CumSum", {x, axis(0)}, {{"reverse", int64_t{1}}}), (std::vector<double>{10, 9, 7, 4}));
  EXPECT_EQ(run("CumSum", {x, axis(-1)}, {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}),
            (std::vector<double>{9, 7, 4, 0}));
  // 2 x 3 along axis 1 and axis 0.
  const Tensor m = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run("CumSum", {m, axis(1)}), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(run("CumSum", {m, axis(0)}), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(run("CumSum", {Tensor::from_values<int32_t>(Shape{3}, {5, -2, 7}), axis(0)}),
            (std::vector<double>{5, 3, 10}));
}

TEST(CumSum, GradientsOfEveryModeAndBadSpecs) {
  const Tensor x = random_tensor(DType::f64, {3, 5}, "cumsum");
  for (int64_t ex : {0, 1})
    for (int64_t rev : {0, 1}) {
      SCOPED_TRACE(fmt::format("exclusive {} reverse {}", ex, rev));
      auto op = make_op(spec_of("CumSum", {x.desc(), axis(1).desc()},
                                {{"exclusive", ex}, {"reverse", rev}}));
      expect_gradient_ok(*op, {x, axis(1)});
    }
  auto op = make_op(spec_of("CumSum", {x.desc(), axis(0).desc()}));
  EXPECT_THROW(op->run_forward(std::vector<Tensor>{x, axis(2)}), InvalidArgument);  // rank 2
  EXPECT_THROW(make_op(spec_of("CumSum", {x.desc(), TensorDesc{DType::f32, Shape{}}})), InvalidArgument);
}

TEST(Einsum, MatchesHandComputedContractions) {
  const Tensor a = f64({2, 3}, {1, 2, 3, 4, 5, 6}), b = f64({3, 2}, {1, 0, 0, 1, 1, 1});
  // [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] = [4 5; 10 11]
  EXPECT_EQ(run("Einsum", {a, b}, {{"equation", std::string("ij,jk->ik")}}), (std::vector<double>{4, 5, 10, 11}));
  // Implicit output: the letters that occur once, alphabetically (here i, k).
  EXPECT_EQ(run("Einsum", {a, b}, {{"equation", std::string("ij,jk")}}), (std::vector<double>{4, 5, 10, 11}));
  EXPECT_EQ(run("Einsum", {a}, {{"equation", std::string("ij->ji")}}), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(run("Einsum", {a}, {{"equation", std::string("ij->")}}), (std::vector<double>{21}));
  const Tensor sq = f64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(run("Einsum", {sq}, {{"equation", std::string("ii")}}), (std::vector<double>{15}));      // trace
  EXPECT_EQ(run("Einsum", {sq}, {{"equation", std::string("ii->i")}}), (std::vector<double>{1, 5, 9}));  // diagonal
  // Outer product and an ellipsis that broadcasts a batch of 1 against a batch of 2.
  EXPECT_EQ(run("Einsum", {f64({2}, {1, 2}), f64({2}, {3, 4})}, {{"equation", std::string("i,j->ij")}}),
            (std::vector<double>{3, 4, 6, 8}));
  const Tensor x = f64({1, 1, 2}, {1, 2}), y = f64({2, 2, 1}, {1, 2, 3, 4});
  // batch 0: [1 2] . [1 2] = 5; batch 1: [1 2] . [3 4] = 11.
  EXPECT_EQ(run("Einsum", {x, y}, {{"equation", std::string("...ij,...jk->...ik")}}), (std::vector<double>{5, 11}));
}

TEST(Einsum, GradientsAndRefusals) {
  const Tensor a = random_tensor(DType::f64, {2, 3, 4}, "ea"), b = random_tensor(DType::f64, {4, 5}, "eb");
  auto op = make_op(spec_of("Einsum", {a.desc(), b.desc()}, {{"equation", std::string("bij,jk->bik")}}));
  expect_gradient_ok(*op, {a, b});
  const Tensor sq = random_tensor(DType::f64, {3, 3}, "sq");
  auto diag = make_op(spec_of("Einsum", {sq.desc()}, {{"equation", std::string("ii->i")}}));
  expect_gradient_ok(*diag, {sq});
  const Tensor one = random_tensor(DType::f64, {1, 1, 2}, "one"), two = random_tensor(DType::f64, {2, 2, 1}, "two");
  auto broadcast = make_op(spec_of("Einsum", {one.desc(), two.desc()}, {{"equation", std::string("...ij,...jk->...ik")}}));
  expect_gradient_ok(*broadcast, {one, two});  // the batch of 1 collects both batches' gradients
  auto refused = [&](const std::string& eq, std::vector<TensorDesc> d) {
    EXPECT_THROW(make_op(spec_of("Einsum", std::move(d), {{"equation", eq}})), InvalidArgument) << eq;
  };
  refused("ij,jk->ik", {a.desc()});                        // two terms, one input
  refused("ij,jk->ik", {TensorDesc{DType::f64, Shape{2, 3}}, TensorDesc{DType::f64, Shape{4, 2}}});  // j: 3 vs 4
  refused("ij->iz", {TensorDesc{DType::f64, Shape{2, 3}}});  // z in no input
  refused("ij->ii", {TensorDesc{DType::f64, Shape{2, 3}}});  // output letter twice
  refused("ijk->i", {TensorDesc{DType::f64, Shape{2, 3}}});  // three letters, rank 2
  refused("i1->i", {TensorDesc{DType::f64, Shape{2, 3}}});   // not a letter
}

}  // namespace
}  // namespace d5::test
