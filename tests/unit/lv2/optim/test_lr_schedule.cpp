#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/lr_schedule.h"
#include "optim_test_nets.h"

namespace d5 {
namespace {

TEST(LrSchedule, StepDecaysEveryStepSize) {
  const StepLr s(3, 0.1);
  EXPECT_DOUBLE_EQ(s.rate(1.0, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(s.rate(1.0, 2, 0), 1.0);
  EXPECT_DOUBLE_EQ(s.rate(1.0, 3, 0), 0.1);
  EXPECT_NEAR(s.rate(1.0, 7, 0), 0.01, 1e-15);
  const StepLr e(2, 0.5, ScheduleUnit::epoch);
  EXPECT_DOUBLE_EQ(e.rate(0.8, 100, 1), 0.8);
  EXPECT_DOUBLE_EQ(e.rate(0.8, 0, 2), 0.4);
}

TEST(LrSchedule, CosineFollowsTheClosedForm) {
  const CosineLr s(10, 0.1);
  EXPECT_DOUBLE_EQ(s.rate(1.0, 0, 0), 1.0);
  EXPECT_NEAR(s.rate(1.0, 5, 0), 0.55, 1e-15);
  EXPECT_NEAR(s.rate(1.0, 10, 0), 0.1, 1e-15);
  EXPECT_NEAR(s.rate(1.0, 25, 0), 0.1, 1e-15);  // stays at the minimum
  EXPECT_NEAR(s.rate(1.0, 2, 0), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 0.2)) / 2, 1e-15);
}

TEST(LrSchedule, WarmupRampsLinearlyThenHandsOver) {
  const LinearWarmupLr w(4, 0.2, std::make_shared<StepLr>(2, 0.5));
  EXPECT_DOUBLE_EQ(w.rate(1.0, 0, 0), 0.2);
  EXPECT_DOUBLE_EQ(w.rate(1.0, 2, 0), 0.6);
  EXPECT_DOUBLE_EQ(w.rate(1.0, 4, 0), 1.0);   // step 0 of the step schedule
  EXPECT_DOUBLE_EQ(w.rate(1.0, 6, 0), 0.5);
  EXPECT_DOUBLE_EQ(LinearWarmupLr(4, 0.2).rate(2.0, 9, 0), 2.0);
}

TEST(LrSchedule, ParsesTheCommandLineForms) {
  EXPECT_DOUBLE_EQ(parse_lr_schedule("step:3:0.1")->rate(1, 3, 0), 0.1);
  EXPECT_NEAR(parse_lr_schedule("cosine:10:0.1")->rate(1, 5, 0), 0.55, 1e-15);
  EXPECT_DOUBLE_EQ(parse_lr_schedule("step:1:0.5@epoch")->rate(1, 100, 2), 0.25);
  EXPECT_DOUBLE_EQ(parse_lr_schedule("warmup:4:0.2+step:2:0.5")->rate(1, 6, 0), 0.5);
  for (const char* bad : {"", "step", "step:0:0.1", "step:x:0.1", "cosine:10:0.1:3", "linear:3", "step:2:0.5@day",
                          "cosine:5+step:1:0.1"}) {
    EXPECT_THROW(parse_lr_schedule(bad), InvalidArgument) << bad;
  }
}

TEST(LrSchedule, OptimizerAppliesItAtEachStep) {
  register_builtin_operators();
  Network net = test::linear_loss_net(Tensor::from_values<float>({1}, {0.0f}));
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("sgd", {{"lr", 1.0}});
  opt->set_schedule(std::make_shared<StepLr>(1, 0.5));
  // gradient 1 at every step: w = -(1 + 0.5 + 0.25)
  for (int s = 0; s < 3; ++s) opt->step(*exec, {{"x", Tensor::from_values<float>({1}, {1.0f})}}, "loss");
  EXPECT_DOUBLE_EQ(net.fetch_tensor("w").get(0), -1.75);
  EXPECT_DOUBLE_EQ(opt->current_learning_rate(), 0.125);
  EXPECT_DOUBLE_EQ(opt->learning_rate(), 1.0);
}

}  // namespace
}  // namespace d5
