// Each reference update rule against values computed by hand (in double precision, from
// torch.optim's documented update) for three steps on a three-element parameter, driven through
// ThreeStepOptimizer::step on the reference executor with chosen gradients.
#include <cmath>

#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/optimizer.h"
#include "optim_test_nets.h"

namespace d5 {
namespace {

const std::vector<std::vector<float>> kGradients = {
    {0.1f, -0.2f, 0.3f}, {0.05f, 0.1f, -0.4f}, {-0.3f, 0.2f, 0.1f}, {0.2f, -0.1f, 0.05f}, {0.1f, 0.3f, -0.2f}};

struct RuleCase {
  std::string label, optimizer;
  Hyperparameters hyper;
  std::vector<std::vector<double>> expected;  // the parameter after each step
};

const std::vector<RuleCase> kCases = {
    {"sgd", "sgd", {{"lr", 0.1}, {"weight_decay", 0.01}},
     {{0.989, -1.978, 0.4695},
      {0.983011, -1.986022, 0.5090305},
      {1.01202799, -2.00403598, 0.49852147}}},
    {"momentum", "momentum", {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.01}},
     {{0.989, -1.978, 0.4695},
      {0.9737099, -1.9654198, 0.47762745},
      {0.986072471, -1.97032874, 0.47551229}}},
    {"nesterov", "nesterov", {{"lr", 0.1}, {"momentum", 0.9}},
     {{0.981, -1.962, 0.443},
      {0.9634, -1.9648, 0.4947},
      {1.00906, -1.99632, 0.48623}}},
    {"adam", "adam", {{"lr", 0.1}, {"weight_decay", 0.01}},
     {{0.900000009, -1.9, 0.400000003},
      {0.805771815, -1.86284626, 0.418091649},
      {0.835903511, -1.87925081, 0.418738802}}},
    {"adam_amsgrad", "adam", {{"lr", 0.1}, {"amsgrad", 1}},
     {{0.90000001, -1.9, 0.400000003},
      {0.806782058, -1.8733663, 0.419351044},
      {0.841504407, -1.90063598, 0.421482225}}},
    {"adamw", "adamw", {{"lr", 0.1}, {"weight_decay", 0.1}},
     {{0.89000001, -1.88, 0.395000003},
      {0.787882058, -1.8345663, 0.410401044},
      {0.814725586, -1.84349032, 0.408428215}}},
    {"adagrad", "adagrad", {{"lr", 0.1}, {"lr_decay", 0.1}, {"weight_decay", 0.01}, {"initial_accumulator_value", 0.1}},
     {{0.967145877, -1.94289085, 0.430578649},
      {0.951195128, -1.96150196, 0.491417637},
      {1.00531843, -1.99622351, 0.47685847}}},
    {"rmsprop", "rmsprop", {{"lr", 0.01}},
     {{0.9000001, -1.90000005, 0.400000033},
      {0.855098815, -1.94490136, 0.480144407},
      {0.9489056, -2.01190235, 0.460403643}}},
    {"rmsprop_centered", "rmsprop", {{"lr", 0.01}, {"momentum", 0.5}, {"centered", 1}, {"weight_decay", 0.01}},
     {{0.89949631, -1.89949626, 0.399496252},
      {0.801357844, -1.88400995, 0.428631946},
      {0.84443744, -1.93778089, 0.422640539}}},
    {"accelegrad", "accelegrad", {{"lr", 0.5}},
     {{0.906341419, -1.81268284, 0.219024257},
      {0.862697841, -1.89996999, 0.568172881},
      {1.11161978, -2.06591796, 0.4851989},
      {0.948591956, -1.98440404, 0.444441942},
      {0.872425655, -2.21290294, 0.596774543}}},
};

class UpdateRule : public testing::TestWithParam<RuleCase> {};

TEST_P(UpdateRule, MatchesHandComputedSteps) {
  register_builtin_operators();
  const RuleCase& c = GetParam();
  Network net = test::linear_loss_net(Tensor::from_values<float>({3}, {1.0f, -2.0f, 0.5f}));
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer(c.optimizer, c.hyper);
  for (size_t s = 0; s < c.expected.size(); ++s) {
    Tensor x(DType::f32, Shape{3});
    for (int64_t i = 0; i < 3; ++i) x.set(i, kGradients[s][static_cast<size_t>(i)]);
    opt->step(*exec, {{"x", x}}, "loss");
    const Tensor w = net.fetch_tensor("w");
    for (int64_t i = 0; i < 3; ++i) {
      // float32 arithmetic against a double oracle: a few ulps of values of order 1.
      EXPECT_NEAR(w.get(i), c.expected[s][static_cast<size_t>(i)], 2e-6) << c.label << " step " << s + 1 << " element " << i;
    }
  }
  EXPECT_EQ(opt->steps(), static_cast<int64_t>(c.expected.size()));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, UpdateRule, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<RuleCase>& i) { return i.param.label; });

TEST(Lbfgs, SolvesAnIsotropicQuadraticInTwoIterations) {
  // loss = |w - x|^2: the first iteration moves by t = 1/|g|_1 along -g; the (s, y) pair it leaves
  // gives H_diag = s.y / y.y = 1/2, the exact inverse Hessian, so the second lands on x.
  register_builtin_operators();
  Network net = test::quadratic_loss_net(Tensor::from_values<float>({3}, {1.0f, -2.0f, 0.5f}));
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("lbfgs");
  const Tensor target = Tensor::from_values<float>({3}, {0.25f, 0.5f, -1.0f});
  opt->step(*exec, {{"x", target}}, "loss");
  const Tensor w = net.fetch_tensor("w");
  for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(w.get(i), target.get(i), 1e-6) << i;
  EXPECT_EQ(opt->hyperparameter("history_size"), 100);
}

TEST(Lbfgs, StrongWolfeLineSearchExtrapolatesUntilTheCurvatureConditionHolds) {
  // loss = |w - x|^2 from w0 = (10, -20, 5), x = (0.25, 0.5, -1): g = 2 (w0 - x), |g|_1 = 72.5, and
  // along d = -g the directional derivative at step t is (1 - 2t) g.d. The first trial
  // t0 = 1/72.5 leaves it at 0.97 of the start (> c2 = 0.9), so the search extrapolates; the
  // cubic's minimizer t = 0.5 is clamped to 10 t0, where the derivative is 0.72 of the start:
  // accepted. Then w = w0 - 10 t0 g = w0 - (20 / 72.5) (w0 - x).
  register_builtin_operators();
  const std::vector<double> w0 = {10, -20, 5}, x = {0.25, 0.5, -1};
  Network net = test::quadratic_loss_net(Tensor::from_values<float>({3}, {10.0f, -20.0f, 5.0f}));
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("lbfgs", {{"line_search", 1}, {"max_iter", 1}});
  opt->step(*exec, {{"x", Tensor::from_values<float>({3}, {0.25f, 0.5f, -1.0f})}}, "loss");
  const Tensor w = net.fetch_tensor("w");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(w.get(static_cast<int64_t>(i)), w0[i] - 20 / 72.5 * (w0[i] - x[i]), 1e-5) << i;
  }
}

TEST(Hyperparameters, DefaultsEqualTorchOptim) {
  register_builtin_operators();
  EXPECT_EQ(make_optimizer("sgd")->learning_rate(), 1e-3);
  EXPECT_EQ(make_optimizer("adam")->hyperparameter("beta2"), 0.999);
  EXPECT_EQ(make_optimizer("adam")->hyperparameter("eps"), 1e-8);
  EXPECT_EQ(make_optimizer("adamw")->hyperparameter("weight_decay"), 1e-2);
  EXPECT_EQ(make_optimizer("adagrad")->hyperparameter("eps"), 1e-10);
  EXPECT_EQ(make_optimizer("rmsprop")->hyperparameter("alpha"), 0.99);
  EXPECT_EQ(make_optimizer("lbfgs")->hyperparameter("tolerance_grad"), 1e-7);
  EXPECT_EQ(make_optimizer("momentum")->hyperparameter("momentum"), 0.9);
}

TEST(Hyperparameters, UnknownAndInvalidOverridesAreRefused) {
  register_builtin_operators();
  try {
    make_optimizer("adam", {{"betas", 0.9}});
    FAIL() << "an unknown hyperparameter was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("beta1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_optimizer("adam", {{"beta1", 1.5}}), InvalidArgument);
  EXPECT_THROW(make_optimizer("sgd", {{"lr", -1}}), InvalidArgument);
  EXPECT_THROW(make_optimizer("nesterov", {{"momentum", 0}}), InvalidArgument);
  EXPECT_THROW(make_optimizer("no-such-optimizer"), InvalidArgument);
  EXPECT_THROW(make_optimizer("adam")->hyperparameter("momentum"), InvalidArgument);
}

TEST(UpdateRules, RefuseNonFloat32Parameters) {
  register_builtin_operators();
  Network net = test::linear_loss_net(Tensor::from_values<double>({2}, {1.0, 2.0}));
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("adam");
  EXPECT_THROW(opt->step(*exec, {{"x", Tensor::from_values<double>({2}, {1.0, 1.0})}}, "loss"), InvalidArgument);
}

// Executors store a zero gradient for a parameter the loss does not depend on, so it gets the
// update for a zero gradient: unchanged without weight decay, decayed with it.
TEST(UpdateRules, ParameterTheLossIgnoresGetsTheZeroGradientUpdate) {
  register_builtin_operators();
  Network net = test::linear_loss_net(Tensor::from_values<float>({2}, {1.0f, 2.0f}));
  net.feed_tensor("unused", Tensor::from_values<float>({2}, {3.0f, 4.0f}), true);
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("momentum", {{"lr", 0.5}});
  opt->step(*exec, {{"x", Tensor::from_values<float>({2}, {1.0f, 1.0f})}}, "loss");
  EXPECT_EQ(net.fetch_tensor("unused").get(0), 3.0);
  EXPECT_EQ(net.fetch_tensor("w").get(0), 0.5);
  auto decaying = make_optimizer("sgd", {{"lr", 0.5}, {"weight_decay", 0.1}});
  decaying->step(*exec, {{"x", Tensor::from_values<float>({2}, {1.0f, 1.0f})}}, "loss");
  EXPECT_NEAR(net.fetch_tensor("unused").get(0), 3.0 * (1 - 0.05), 1e-6);
}

}  // namespace
}  // namespace d5
