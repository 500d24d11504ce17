// Convergence on real data (label: convergence): LeNet-5 trained on the first 8,000 images of the
// MNIST test split reaches >= 97% accuracy on the last 2,000. Adam (lr 1e-3, batch 32) gets there
// in a few epochs; the test allows 12 so that a slower, still healthy run does not fail, and
// reports the epochs and time it took.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/train/dataset.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/samplers.h"
#include "deep500/train/trainer.h"

namespace d5 {
namespace {

std::unique_ptr<Dataset> mnist_part(const std::string& range) {
  DatasetSpec spec;
  spec.name = "mnist";
  spec.data_dir = D5_SOURCE_DIR "/../shared/data/mnist";
  spec.split = "test";
  spec.options["range"] = range;
  return open_dataset(spec);
}

// The fastest executor built in: training time, not the executor, is what this test is about.
std::string fastest_backend() {
  const auto built = executor_backends();
  for (const char* b : {"torch", "onednn"}) {
    if (std::find(built.begin(), built.end(), b) != built.end()) return b;
  }
  return "reference";
}

TEST(MnistConvergence, LeNet5Reaches97PercentOnRealData) {
  if (!std::filesystem::exists(D5_SOURCE_DIR "/../shared/data/mnist")) {
    GTEST_SKIP() << "no MNIST at " D5_SOURCE_DIR "/../shared/data/mnist (CI places ../shared beside the checkout)";
  }
  register_builtin_operators();
  register_builtin_backends();
  const auto train = mnist_part("0:8000"), test = mnist_part("8000:10000");
  ASSERT_EQ(train->size(), 8000);
  ASSERT_EQ(test->size(), 2000);
  ModelOptions mo;
  mo.batch = 32;
  mo.classes = 10;
  mo.with_loss = mo.training = true;
  Network net = build_model("lenet5", mo);
  const std::string backend = fastest_backend();
  auto ex = make_executor(net, backend);
  auto adam = make_optimizer("adam", {{"lr", 1e-3}});
  auto sampler = make_sampler("shuffle", *train, mo.batch, /*drop_last=*/true, 7);
  TrainingOptions o;
  o.epochs = 12;
  o.target = accuracy_target(0.97);
  o.train_accuracy_every = 0;
  const TrainingResult r = test_training(*ex, *train, test.get(), *adam, *sampler, o);
  std::cout << fmt::format("LeNet-5 on MNIST ({}): test accuracy {:.4f} after {} epoch(s), {} steps; {:.2f} s of "
                           "training, {:.2f} s wall\n",
                           backend, r.final_test("accuracy"), r.target_epoch, r.steps, r.time_to_target_s,
                           r.wall_time_s);
  ::testing::Test::RecordProperty("backend", backend);
  ::testing::Test::RecordProperty("epochs", std::to_string(r.target_epoch));
  ::testing::Test::RecordProperty("training_time_s", std::to_string(r.training_time_s));
  EXPECT_TRUE(r.reached_target) << "final test accuracy " << r.final_test("accuracy") << " after " << r.steps
                                << " steps";
  EXPECT_GE(r.final_test("accuracy"), 0.97);
}

}  // namespace
}  // namespace d5
