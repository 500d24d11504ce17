// Optimizers training a small MLP through every executor this build has; checkpoints; divergence.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/divergence.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/optimizer_validation.h"
#include "optim_test_nets.h"

namespace d5 {
namespace {

Network small_mlp() { return test::small_mlp(21); }

// Rates at which ten steps on one batch reduce the loss of the MLP for each optimizer.
const std::map<std::string, Hyperparameters> kTraining = {
    {"sgd", {{"lr", 0.1}}},          {"momentum", {{"lr", 0.05}}},  {"nesterov", {{"lr", 0.05}}},
    {"adam", {}},                    {"adamw", {}},                 {"adagrad", {}},
    {"rmsprop", {{"lr", 1e-3}}},     {"accelegrad", {{"lr", 0.05}}}, {"lbfgs", {{"lr", 0.1}, {"max_iter", 5}}}};

std::vector<std::string> executors() {
  register_builtin_operators();
  std::vector<std::string> out;
  for (const char* b : {"reference", "onednn", "torch"}) {
    const auto all = executor_backends();
    if (std::find(all.begin(), all.end(), b) != all.end()) out.push_back(b);
  }
  return out;
}

std::vector<std::string> optimizers_to_train() {
  std::vector<std::string> out;
  for (const auto& [name, h] : kTraining) {
    out.push_back(name);
    if (name == "accelegrad") continue;
    try {
      make_optimizer("torch-" + name);
      out.push_back("torch-" + name);
    } catch (const Unimplemented&) {
    }
  }
  return out;
}

TEST(Training, EveryOptimizerReducesTheLossOnEveryExecutor) {
  const Network probe = small_mlp();
  const TensorMap batch = random_batches(probe, 5, 4)(0);
  for (const auto& backend : executors()) {
    for (const auto& name : optimizers_to_train()) {
      const std::string base = name.rfind("torch-", 0) == 0 ? name.substr(6) : name;
      Network net = small_mlp();
      auto exec = make_executor(net, backend);
      auto opt = make_optimizer(name, kTraining.at(base));
      const int steps = base == "lbfgs" ? 3 : 10;
      const double first = opt->step(*exec, batch, "loss").at("loss").get(0);
      for (int s = 1; s < steps; ++s) opt->step(*exec, batch, "loss");
      const double last = exec->inference(batch).at("loss").get(0);
      EXPECT_LT(last, 0.95 * first) << name << " on " << backend << ": " << first << " -> " << last;
    }
  }
}

TEST(Training, SgdParametersAgreeAcrossExecutors) {
  const Network probe = small_mlp();
  const auto batches = random_batches(probe, 6, 4);
  std::map<std::string, Network> nets;
  for (const auto& backend : executors()) {
    Network net = small_mlp();
    auto exec = make_executor(net, backend);
    auto opt = make_optimizer("momentum", {{"lr", 0.05}});
    for (int s = 0; s < 3; ++s) opt->step(*exec, batches(s), "loss");
    nets.emplace(backend, std::move(net));
  }
  const Network& ref = nets.at("reference");
  for (const auto& [backend, net] : nets) {
    for (const auto& p : ref.get_params()) {
      // Executors sum GEMM products in different orders: float32 rounding, amplified over three
      // steps, stays orders of magnitude below the update sizes (lr * gradient ~ 1e-3).
      EXPECT_LE(relative_difference(net.fetch_tensor(p), ref.fetch_tensor(p)), 1e-4) << backend << " " << p;
    }
  }
}

class Checkpoint : public testing::TestWithParam<std::string> {};

TEST_P(Checkpoint, ResumingFromStateIsBitwiseIdentical) {
  const std::string name = GetParam();
  register_builtin_operators();
  if (name.rfind("torch-", 0) == 0) {
    try {
      make_optimizer(name);
    } catch (const Unimplemented&) {
      GTEST_SKIP() << "this build has no torch backend";
    }
  }
  const std::string base = name.rfind("torch-", 0) == 0 ? name.substr(6) : name;
  const Network probe = small_mlp();
  const auto batches = random_batches(probe, 9, 4);
  Network straight = small_mlp();
  auto es = make_executor(straight, "reference");
  auto os = make_optimizer(name, kTraining.at(base));
  for (int s = 0; s < 4; ++s) os->step(*es, batches(s), "loss");

  Network first = small_mlp();
  auto ef = make_executor(first, "reference");
  auto of = make_optimizer(name, kTraining.at(base));
  for (int s = 0; s < 2; ++s) of->step(*ef, batches(s), "loss");
  const OptimizerState saved = of->state();
  Network resumed = small_mlp();
  for (const auto& p : resumed.get_params()) resumed.feed_tensor(p, first.fetch_tensor(p).clone());
  auto er = make_executor(resumed, "reference");
  auto orr = make_optimizer(name, kTraining.at(base));
  orr->load_state(saved);
  EXPECT_EQ(orr->steps(), 2);
  for (int s = 2; s < 4; ++s) orr->step(*er, batches(s), "loss");
  for (const auto& p : straight.get_params()) {
    EXPECT_EQ(relative_difference(resumed.fetch_tensor(p), straight.fetch_tensor(p)), 0) << name << " " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Checkpoint,
                         testing::Values("sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop",
                                         "accelegrad", "lbfgs", "torch-momentum", "torch-adam", "torch-rmsprop"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Checkpoint, StateFromAnotherOptimizerIsRefused) {
  register_builtin_operators();
  auto sgd = make_optimizer("lbfgs");
  auto adam = make_optimizer("adam");
  EXPECT_THROW(sgd->load_state(adam->state()), InvalidArgument);
}

TEST(GradientHook, RunsBetweenBackpropAndTheUpdate) {
  register_builtin_operators();
  Network net = small_mlp();
  auto exec = make_executor(net, "reference");
  auto opt = make_optimizer("sgd", {{"lr", 1.0}});
  const Tensor before = net.fetch_tensor("fc1.weight").clone();
  int calls = 0;
  // Zeroing every gradient in the hook must leave every parameter unchanged.
  opt->set_gradient_hook([&](Network& n) {
    ++calls;
    for (const auto& [p, g] : n.gradient()) n.fetch_tensor(g).fill(0);
  });
  opt->step(*exec, random_batches(net, 1, 4)(0), "loss");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(relative_difference(net.fetch_tensor("fc1.weight"), before), 0);
}

TEST(Divergence, IdenticalOptimizersDoNotDiverge) {
  register_builtin_operators();
  const Network probe = small_mlp();
  DivergenceOptions o;
  o.optimizer = o.twin = "adam";
  o.steps = 3;
  const DivergenceReport r = trajectory_divergence(small_mlp, random_batches(probe, 2, 4), o);
  ASSERT_EQ(r.steps.size(), 3u);
  for (const auto& s : r.steps) {
    EXPECT_EQ(s.total.l2, 0);
    EXPECT_EQ(s.loss_a, s.loss_b);
  }
  EXPECT_EQ(r.parameters, probe.parameter_count());
}

TEST(Divergence, DifferentOptimizersDriftApartAndNormsAreConsistent) {
  register_builtin_operators();
  const Network probe = small_mlp();
  DivergenceOptions o;
  o.optimizer = "sgd";
  o.twin = "momentum";
  o.hyper = {{"lr", 0.05}};
  o.steps = 4;
  const DivergenceReport r = trajectory_divergence(small_mlp, random_batches(probe, 2, 4), o);
  // Step 1: momentum's first buffer is the gradient itself, so both take the same step.
  EXPECT_EQ(r.steps[0].total.l2, 0);
  EXPECT_GT(r.steps[1].total.l2, 0);
  EXPECT_GT(r.steps[3].total.l2, r.steps[1].total.l2);
  for (const auto& s : r.steps) {
    double sq = 0, mx = 0;
    for (const auto& [p, d] : s.params) {
      sq += d.l2 * d.l2;
      mx = std::max(mx, d.linf);
      EXPECT_LE(d.linf, d.l2 + 1e-15) << p;
    }
    EXPECT_NEAR(s.total.l2, std::sqrt(sq), 1e-12 + 1e-9 * s.total.l2);
    EXPECT_EQ(s.total.linf, mx);
  }
}

}  // namespace
}  // namespace d5
