// The trainer on the reference executor: learning, limits, events, test passes over a partial
// last batch, the results case; the loss head (quality measures: test_quality.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/train/checkpoint.h"
#include "deep500/core/error.h"
#include "deep500/net/graph_executor.h"
#include "deep500/train/loss_head.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/samplers.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/train/trainer.h"
#include "train_fixtures.h"
#include "../../test_memory_device.h"

namespace d5 {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

// The MLP at batch 8 on the reference executor, 96 training and 30 test samples, SGD.
class MlpTrainerTest : public TrainerTest {
 protected:
  Network net = test::learnable_mlp(8);
  std::unique_ptr<GraphExecutor> ex = make_executor(net, "reference");
  const test::LearnableSet train{96, 1}, test_set{30, 2};
  test::PlainSgd sgd{0.05};
};

// A metric added with add_step_metric takes one sample per step and reaches the result case.
TEST_F(MlpTrainerTest, StepMetricsSampleEveryStepAndJoinTheCase) {
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.max_steps = 5;
  Trainer trainer(*ex, train, nullptr, sgd, sampler, o);
  trainer.add_step_metric(std::make_unique<WallTime>());
  const TrainingResult r = trainer.train();
  ASSERT_EQ(r.step_metrics.size(), 1u);
  EXPECT_EQ(r.step_metrics[0].name, "wall_time");
  ASSERT_EQ(r.step_metrics[0].samples.size(), 5u);
  // Each sample times the optimizer's step alone, a part of that step's step_time.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GT(r.step_metrics[0].samples[i], 0);
    EXPECT_LE(r.step_metrics[0].samples[i], r.step_times_s[i]);
  }
  const CaseResult c = training_case("mlp", "reference", o, r);
  EXPECT_TRUE(std::any_of(c.metrics.begin(), c.metrics.end(), [](const MetricRecord& m) { return m.name == "wall_time"; }));
}

TEST_F(MlpTrainerTest, LearnsAndRecordsCurves) {
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 4;
  o.train_accuracy_every = 3;
  const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
  EXPECT_EQ(r.stop_reason, StopReason::epochs);
  EXPECT_EQ(r.steps, 48);
  EXPECT_EQ(r.samples, 48 * 8);
  EXPECT_EQ(r.epochs_completed, 4);
  ASSERT_EQ(r.loss.size(), 48u);
  EXPECT_EQ(r.step_times_s.size(), 48u);
  EXPECT_EQ(r.train_accuracy.size(), 16u);
  ASSERT_EQ(r.test_curve("accuracy").size(), 4u);  // one per epoch; the final one coincides with the last
  EXPECT_EQ(r.test_curve("accuracy").back().step, 48);
  // Three well separated classes: chance is 1/3, the trained MLP gets nearly all right.
  EXPECT_GT(r.final_test("accuracy"), 0.9);
  EXPECT_LT(r.loss.back().value, 0.5 * r.loss.front().value);
  EXPECT_GT(r.throughput(), 0);
  EXPECT_GT(r.training_time_s, 0);
  EXPECT_GE(r.wall_time_s, r.training_time_s);
  EXPECT_FALSE(r.reached_target);
}

TEST_F(MlpTrainerTest, StopsAtTheTargetAccuracy) {
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 50;
  o.target = accuracy_target(0.9);
  o.test_every_steps = 4;
  const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
  EXPECT_EQ(r.stop_reason, StopReason::target);
  ASSERT_TRUE(r.reached_target);
  EXPECT_GE(r.final_test("accuracy"), 0.9);
  EXPECT_EQ(r.target_step, r.steps);
  EXPECT_EQ(r.target_step % 4, 0);
  EXPECT_LT(r.steps, 50 * 12);
  EXPECT_GT(r.time_to_target_s, 0);
  EXPECT_LE(r.time_to_target_s, r.training_time_s);
  // Every earlier test pass was below the target.
  for (size_t i = 0; i + 1 < r.test_curve("accuracy").size(); ++i) EXPECT_LT(r.test_curve("accuracy")[i].value, 0.9);
  const CaseResult c = training_case("mlp", "reference", o, r);
  EXPECT_EQ(c.state, CaseState::Passed);
  EXPECT_EQ(c.extra["time_to_target"]["step"].get<int64_t>(), r.target_step);
}

TEST_F(MlpTrainerTest, StepAndTimeLimits) {
  {
    test::InOrderSampler sampler(train.size(), 8);
    TrainingOptions o;
    o.epochs = 0;
    o.max_steps = 17;  // one epoch and 5 batches
    const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
    EXPECT_EQ(r.stop_reason, StopReason::steps);
    EXPECT_EQ(r.steps, 17);
    EXPECT_EQ(r.epochs_completed, 1);
    EXPECT_EQ(sampler.state().epoch, 1);
    EXPECT_EQ(sampler.state().batch, 5);
  }
  {
    // A step limit at the end of an epoch completes the epoch (with its test pass).
    test::InOrderSampler sampler(train.size(), 8);
    TrainingOptions o;
    o.epochs = 0;
    o.max_steps = 24;
    o.final_test = false;
    const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
    EXPECT_EQ(r.stop_reason, StopReason::steps);
    EXPECT_EQ(r.epochs_completed, 2);
    EXPECT_EQ(r.test_curve("accuracy").size(), 2u);
    EXPECT_EQ(sampler.state().epoch, 2);
    EXPECT_EQ(sampler.state().batch, 0);
  }
  {
    test::InOrderSampler sampler(train.size(), 8);
    TrainingOptions o;
    o.epochs = 100;
    o.time_limit_s = 1e-9;  // any step exceeds it
    const TrainingResult r = test_training(*ex, train, nullptr, sgd, sampler, o);
    EXPECT_EQ(r.stop_reason, StopReason::time_limit);
    EXPECT_EQ(r.steps, 1);
    EXPECT_TRUE(std::isnan(r.final_test("accuracy")));
  }
}

// An interruption asked for during step 5 stops the run before step 6: no final test pass, the
// checkpoint saved at the stop, and a run with an interruption and agreeing ranks refused.
TEST_F(MlpTrainerTest, AnInterruptionStopsBeforeTheNextStepAndSavesTheCheckpoint) {
  const std::string ck =
      (std::filesystem::temp_directory_path() / ("d5-interrupt-" + std::to_string(getpid()) + ".ckpt")).string();
  std::filesystem::remove(ck);
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 100;
  o.checkpoint_path = ck;
  int64_t asked = 0;
  o.interrupted = [&] { return ++asked > 5; };
  const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
  EXPECT_EQ(r.stop_reason, StopReason::interrupted);
  EXPECT_STREQ(to_string(r.stop_reason), "interrupted");
  EXPECT_EQ(r.steps, 5);
  EXPECT_EQ(asked, 6);
  EXPECT_TRUE(r.test_curve("accuracy").empty()) << "a test pass ran after the interruption";
  EXPECT_EQ(load_checkpoint(ck).meta.at("step").get<int64_t>(), 5);
  std::filesystem::remove(ck);

  test::InOrderSampler again(train.size(), 8);
  o.agree = [](bool mine) { return mine; };
  EXPECT_THROW(test_training(*ex, train, &test_set, sgd, again, o), InvalidArgument);
}

// Records the order of hooks and stops after a given step.
class Recorder : public TrainingEvent {
 public:
  explicit Recorder(int64_t stop_after) : stop_after_(stop_after) {}
  bool before_training(const TrainingProgress&) override { return log("train{"); }
  void after_training(const TrainingProgress&) override { log("}train"); }
  bool before_epoch(const TrainingProgress& p) override { return log("epoch" + std::to_string(p.epoch) + "{"); }
  bool after_epoch(const TrainingProgress&) override { return log("}epoch"); }
  bool before_batch(const TrainingProgress&, const Batch& b) override {
    EXPECT_EQ(b.at(kDataInput).shape()[0], 4);
    return log("b");
  }
  bool after_batch(const TrainingProgress& p, const TensorMap& out) override {
    EXPECT_TRUE(out.count(kZooLoss));
    log("a");
    return p.step < stop_after_;
  }
  bool before_test(const TrainingProgress&) override { return log("test{"); }
  bool after_test(const TrainingProgress&, double acc) override {
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    return log("}test");
  }
  std::string trace;

 private:
  bool log(const std::string& s) {
    trace += s + " ";
    return true;
  }
  int64_t stop_after_;
};

TEST_F(TrainerTest, EventsFireInOrderAndStopTheRun) {
  Network net = test::learnable_mlp(4);
  auto ex = make_executor(net, "reference");
  const test::LearnableSet train(8, 1), test_set(6, 2);
  test::PlainSgd sgd(0.05);
  {
    test::InOrderSampler sampler(train.size(), 4);
    TrainingOptions o;
    o.epochs = 2;
    auto rec = std::make_shared<Recorder>(1000);
    test_training(*ex, train, &test_set, sgd, sampler, o, {rec});
    EXPECT_EQ(rec->trace,
              "train{ epoch0{ b a b a }epoch test{ }test epoch1{ b a b a }epoch test{ }test }train ");
  }
  {
    test::InOrderSampler sampler(train.size(), 4);
    TrainingOptions o;
    o.epochs = 2;
    auto rec = std::make_shared<Recorder>(3);
    const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o, {rec});
    EXPECT_EQ(r.stop_reason, StopReason::event);
    EXPECT_EQ(r.steps, 3);
    EXPECT_EQ(rec->trace, "train{ epoch0{ b a b a }epoch test{ }test epoch1{ b a }train ");
  }
}

// A last partial test batch is padded and masked: the accuracy over 10 samples in batches of 4
// equals the accuracy of the same parameters sample by sample.
TEST_F(TrainerTest, TestPassCountsOnlyTheRealRowsOfAPartialBatch) {
  Network net4 = test::learnable_mlp(4), net1 = test::learnable_mlp(1);  // same seed: same parameters
  auto ex4 = make_executor(net4, "reference");
  auto ex1 = make_executor(net1, "reference");
  const test::LearnableSet train(12, 1), test_set(10, 2);
  test::PlainSgd sgd(0.05);
  // A few steps so that the predictions are neither all right nor all wrong.
  test::InOrderSampler s4(train.size(), 4);
  TrainingOptions o;
  o.epochs = 1;
  o.final_test = false;
  o.test_every_epochs = 0;
  Trainer t4(*ex4, train, &test_set, sgd, s4, o);
  t4.train();
  for (const std::string& p : net4.get_params()) net1.fetch_tensor(p).copy_from(net4.fetch_tensor(p));
  test::InOrderSampler s1(train.size(), 1);
  Trainer t1(*ex1, train, &test_set, sgd, s1, o);
  const double batched = t4.test_quality().at("accuracy"), single = t1.test_quality().at("accuracy");
  EXPECT_EQ(batched, single);
  EXPECT_NEAR(single * 10, std::round(single * 10), 1e-9);  // a multiple of 1/10: no padding row counted
}

TEST_F(MlpTrainerTest, RefusesMismatchedPieces) {
  test::InOrderSampler wrong_batch(train.size(), 4), right(train.size(), 8), wrong_size(50, 8);
  TrainingOptions o;
  EXPECT_THROW(Trainer(*ex, train, nullptr, sgd, wrong_batch, o), InvalidArgument);
  EXPECT_THROW(Trainer(*ex, train, nullptr, sgd, wrong_size, o), InvalidArgument);
  TrainingOptions target = o;
  target.target = accuracy_target(0.5);
  EXPECT_THROW(Trainer(*ex, train, nullptr, sgd, right, target), InvalidArgument);
  TrainingOptions no_limit = o;
  no_limit.epochs = 0;
  EXPECT_THROW(Trainer(*ex, train, nullptr, sgd, right, no_limit), InvalidArgument);
  TrainingOptions no_loss = o;
  no_loss.loss = "missing";
  EXPECT_THROW(Trainer(*ex, train, nullptr, sgd, right, no_loss), InvalidArgument);
}

TEST_F(TrainerTest, ResultsCaseFailsAMissedTarget) {
  Network net = test::learnable_mlp(8);
  auto ex = make_executor(net, "reference");
  const test::LearnableSet train(16, 1), test_set(9, 2);
  test::PlainSgd sgd(1e-6);  // too small to learn anything in one epoch
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 1;
  o.target = accuracy_target(1.0);
  const TrainingResult r = test_training(*ex, train, &test_set, sgd, sampler, o);
  EXPECT_FALSE(r.reached_target);
  const CaseResult c = training_case("mlp", "reference", o, r);
  EXPECT_EQ(c.state, CaseState::Failed);
  EXPECT_EQ(c.level, "L2");
  EXPECT_FALSE(c.extra["reached_target"].get<bool>());
  ASSERT_FALSE(c.metrics.empty());
  EXPECT_EQ(c.metrics[0].name, "step_time");
  EXPECT_EQ(c.metrics[0].samples.size(), 2u);
  EXPECT_EQ(c.metrics[1].name, "data_time");
  EXPECT_LE(c.metrics[1].samples[0], c.metrics[0].samples[0]);
  EXPECT_EQ(c.extra["curves"]["loss"].size(), 2u);
}

// 14 steps in one go, or 7 steps, a checkpoint, and 7 more with a new network, executor,
// optimizer and sampler: the same parameters bit for bit. Adam has per-parameter state and the
// shuffled sampler crosses epoch boundaries (5 batches per epoch) on both sides of the split.
TEST_F(TrainerTest, ResumedRunIsBitwiseEqualToTheUninterruptedOne) {
  register_builtin_backends();
  const test::LearnableSet train(40, 1), test_set(9, 2);
  const std::string ck =
      (std::filesystem::temp_directory_path() / ("d5-trainer-" + std::to_string(getpid()) + ".ckpt")).string();
  auto run = [&](int64_t steps, const std::string& resume_from, const std::string& save_to) {
    Network net = test::learnable_mlp(8);
    auto ex = make_executor(net, "reference");
    auto adam = make_optimizer("adam", {{"lr", 1e-2}});
    auto sampler = make_sampler("shuffle", train, 8, /*drop_last=*/true, 11);
    TrainingOptions o;
    o.epochs = 0;
    o.max_steps = steps;
    o.checkpoint_path = save_to;
    Trainer t(*ex, train, &test_set, *adam, *sampler, o);
    if (!resume_from.empty()) t.resume(resume_from);
    const TrainingResult r = t.train();
    EXPECT_EQ(t.progress().step, steps);
    EXPECT_EQ(r.steps, resume_from.empty() ? steps : steps - 7);
    std::map<std::string, Tensor> params;
    for (const std::string& p : net.get_params()) params[p] = net.fetch_tensor(p).clone();
    return params;
  };
  const auto whole = run(14, "", "");
  const auto half = run(7, "", ck);
  const auto resumed = run(14, ck, "");
  ASSERT_EQ(whole.size(), resumed.size());
  bool half_differs = false;
  for (const auto& [name, w] : whole) {
    const Tensor& r = resumed.at(name);
    ASSERT_EQ(w.bytes(), r.bytes());
    EXPECT_EQ(std::memcmp(w.data(), r.data(), w.bytes()), 0) << name;
    half_differs = half_differs || std::memcmp(w.data(), half.at(name).data(), w.bytes()) != 0;
  }
  EXPECT_TRUE(half_differs) << "the second half of the run changed nothing: the comparison proves nothing";

  // A checkpoint of another optimizer, or a file that is no training checkpoint, is refused.
  {
    Network net = test::learnable_mlp(8);
    auto ex = make_executor(net, "reference");
    test::PlainSgd sgd(0.1);
    auto sampler = make_sampler("shuffle", train, 8, true, 11);
    TrainingOptions o;
    Trainer t(*ex, train, nullptr, sgd, *sampler, o);
    EXPECT_THROW(t.resume(ck), InvalidArgument);
    save_checkpoint(ck, {{"x", Tensor::from_values<float>(Shape{1}, {1.f})}});
    EXPECT_THROW(t.resume(ck), FormatError);
  }
  std::filesystem::remove(ck);
}

// A DataLoader that prefetches hands out the sampler's batches in the sampler's order: training
// through it gives the parameters of training through the sampler directly, bit for bit; so does
// a loader that hands the input and the labels out on a device (the tests' host-memory one,
// through its staging memory), which the executor copies back and the training accuracy reads.
TEST_F(TrainerTest, LoaderWithPrefetchTrainsLikeTheSampler) {
  register_builtin_backends();
  const test::LearnableSet train(40, 1);
  const Device device = test::test_memory_device(0, "testmem-trainer");
  test::test_memory_allocator("testmem-trainer")->staging = true;
  auto params_after = [&](bool through_loader, bool on_device = false) {
    Network net = test::learnable_mlp(8);
    auto ex = make_executor(net, "reference");
    auto adam = make_optimizer("adam", {{"lr", 1e-2}});
    auto sampler = make_sampler("shuffle", train, 8, /*drop_last=*/true, 5);
    TrainingOptions o;
    o.epochs = 3;
    if (through_loader) {
      DataLoaderOptions lo{2, 2};
      if (on_device) lo.devices = {{kDataInput, device}, {kDataLabels, device}};
      DataLoader loader(train, std::move(sampler), lo);
      const TrainingResult r = test_training(*ex, loader, nullptr, *adam, o);
      EXPECT_EQ(r.steps, 15);
      if (on_device) {
        EXPECT_EQ(r.train_accuracy.size(), 15u);
      }
      EXPECT_EQ(loader.epoch(), 3);
    } else {
      const TrainingResult r = test_training(*ex, train, nullptr, *adam, *sampler, o);
      EXPECT_EQ(r.steps, 15);
    }
    std::vector<Tensor> params;
    for (const std::string& p : net.get_params()) params.push_back(net.fetch_tensor(p).clone());
    return params;
  };
  const auto direct = params_after(false), loaded = params_after(true), on_device = params_after(true, true);
  ASSERT_EQ(direct.size(), loaded.size());
  ASSERT_EQ(direct.size(), on_device.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(std::memcmp(direct[i].data(), loaded[i].data(), direct[i].bytes()), 0) << i;
    EXPECT_EQ(std::memcmp(direct[i].data(), on_device[i].data(), direct[i].bytes()), 0) << i;
  }
  EXPECT_GE(test::test_memory_allocator("testmem-trainer")->staged_copies, 30);
}

// The loss head computes what the zoo's own loss computes for the same parameters and batch.
TEST_F(TrainerTest, LossHeadMatchesTheZooLoss) {
  ModelOptions mo;
  mo.batch = 5;
  mo.classes = test::kClasses;
  mo.input_shape = {test::kFeatures};
  Network bare = build_model("mlp", mo);
  mo.with_loss = true;
  Network zoo = build_model("mlp", mo);
  const LossHead head = append_softmax_cross_entropy(bare);
  EXPECT_EQ(head.logits, kZooLogits);
  const test::LearnableSet data(5, 3);
  const std::vector<int64_t> idx = {0, 1, 2, 3, 4};
  const Batch b = data.fetch(idx);
  const TensorMap feeds = {{kZooInput, b.at(kDataInput)}, {kZooLabels, b.at(kDataLabels)}};
  auto e1 = make_executor(bare, "reference");
  auto e2 = make_executor(zoo, "reference");
  const double l1 = e1->inference(feeds).at(head.loss).get(0), l2 = e2->inference(feeds).at(kZooLoss).get(0);
  EXPECT_EQ(l1, l2);
  EXPECT_GT(l1, 0);
  EXPECT_THROW(append_softmax_cross_entropy(bare), InvalidArgument);  // two outputs now
}

}  // namespace
}  // namespace d5
