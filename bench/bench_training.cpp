// Time to accuracy of d5 training on the torch backend against a plain LibTorch program doing the
// same work: LeNet-5 on MNIST (by default the real test split: samples 0:8000 train, 8000:10000
// test), the same initial parameters, the same batches in the same order, the same optimizer
// (by default torch-adam, d5's native twin of torch::optim::Adam, so both sides make the same
// updates and reach the target in the same epoch; --optimizer adam uses d5's own Adam, whose last
// bits differ and so may reach it an epoch earlier or later), a test pass over the test set after
// every epoch, until the test accuracy reaches the target.
//
// d5's side is the Trainer: each step fetches the batch from the Dataset, runs the TorchExecutor's
// forward and backward and the d5 optimizer's update. The LibTorch side is what one writes by
// hand: the whole training set as one tensor, index_select of the batch, a torch::nn::Module,
// cross_entropy, backward, torch::optim's step. Rounds alternate which side goes first, in one
// process, so load changes hit both alike (a first round warms up and is discarded); each round gives a ratio of times to accuracy (wall
// time including the test passes, and training time alone) and of median step times, and the
// rounds give medians with 95% CIs. Target: time-to-accuracy ratio <= 1.05.
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/train/dataset.h"
#include "deep500/net/graph_executor.h"
#include "deep500/metrics/manifest.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/samplers.h"
#include "deep500/core/threads.h"
#include "deep500/train/trainer.h"

namespace {

using namespace d5;
using namespace d5::bench;
using Clock = std::chrono::steady_clock;

struct LeNetImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 6, 5).padding(2)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(6, 16, 5)};
  torch::nn::Linear fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  LeNetImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    x = x.flatten(1);
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
    return fc3(x);
  }
};
TORCH_MODULE(LeNet);

torch::Tensor as_torch(const Tensor& t) {
  std::vector<int64_t> shape = t.shape().dims();
  const auto type = t.dtype() == DType::f32 ? torch::kFloat32 : torch::kInt64;
  return torch::from_blob(const_cast<void*>(t.data()), shape, type).clone();
}

struct RunResult {
  bool reached = false;
  double wall_tta_s = 0, train_tta_s = 0;
  int64_t epochs = 0, steps = 0;
  double median_step_s = 0;
  double accuracy = 0;
  double median_data_s = 0;  // d5: the batch's fetch within the step
};

struct Setup {
  const Dataset* train;
  const Dataset* test;
  int64_t batch;
  double lr;
  double target;
  int64_t max_epochs;
  uint64_t seed;
  std::string optimizer;  // d5's: adam, torch-adam (torch::optim's Adam behind d5's interface), sgd, torch-sgd
};

Network lenet(const Setup& s) {
  ModelOptions mo;
  mo.batch = s.batch;
  mo.classes = 10;
  mo.with_loss = mo.training = true;
  mo.seed = s.seed;
  return build_model("lenet5", mo);
}

RunResult run_d5(const Setup& s) {
  Network net = lenet(s);
  auto ex = make_executor(net, "torch");
  auto opt = make_optimizer(s.optimizer, {{"lr", s.lr}});
  auto sampler = make_sampler("shuffle", *s.train, s.batch, true, s.seed);
  TrainingOptions o;
  o.epochs = s.max_epochs;
  o.target = accuracy_target(s.target);
  o.train_accuracy_every = 0;
  const TrainingResult r = test_training(*ex, *s.train, s.test, *opt, *sampler, o);
  return {r.reached_target, r.wall_time_to_target_s, r.time_to_target_s, r.target_epoch, r.target_step,
          median(r.step_times_s), r.final_test("accuracy"), median(r.data_times_s)};
}

RunResult run_torch(const Setup& s, const torch::Tensor& train_x, const torch::Tensor& train_y,
                    const torch::Tensor& test_x, const torch::Tensor& test_y) {
  // The same initial parameters as the zoo network d5 trains.
  LeNet model;
  {
    const Network init = lenet(s);
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) p.value().copy_(as_torch(init.fetch_tensor(p.key())));
  }
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (s.optimizer == "adam" || s.optimizer == "torch-adam") {
    opt = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(s.lr));
  } else {
    opt = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(s.lr));
  }
  auto sampler = make_sampler("shuffle", *s.train, s.batch, true, s.seed);
  RunResult r;
  std::vector<double> steps;
  const auto wall0 = Clock::now();
  double train_time = 0;
  for (int64_t epoch = 0; epoch < s.max_epochs && !r.reached; ++epoch) {
    model->train();
    for (std::vector<int64_t> idx = sampler->next(); !idx.empty(); idx = sampler->next()) {
      const auto t0 = Clock::now();
      const auto index = torch::from_blob(idx.data(), {static_cast<int64_t>(idx.size())}, torch::kInt64);
      const auto x = train_x.index_select(0, index), y = train_y.index_select(0, index);
      opt->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      opt->step();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      steps.push_back(dt);
      train_time += dt;
      ++r.steps;
    }
    sampler->reset();
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0;
    for (int64_t first = 0; first < test_x.size(0); first += s.batch) {
      const int64_t n = std::min(s.batch, test_x.size(0) - first);
      const auto pred = model->forward(test_x.narrow(0, first, n)).argmax(1);
      correct += pred.eq(test_y.narrow(0, first, n)).sum().item<int64_t>();
    }
    r.accuracy = static_cast<double>(correct) / static_cast<double>(test_x.size(0));
    r.epochs = epoch + 1;
    if (r.accuracy >= s.target) {
      r.reached = true;
      r.train_tta_s = train_time;
      r.wall_tta_s = std::chrono::duration<double>(Clock::now() - wall0).count();
    }
  }
  r.median_step_s = median(steps);
  return r;
}

std::unique_ptr<Dataset> open_mnist(const std::string& dir, const std::string& split, const std::string& range) {
  DatasetSpec spec;
  spec.name = "mnist";
  spec.data_dir = dir;
  spec.split = split;
  if (!range.empty()) spec.options["range"] = range;
  return open_dataset(spec);
}

// Every sample of a dataset as one tensor per name.
std::pair<torch::Tensor, torch::Tensor> whole(const Dataset& d) {
  std::vector<int64_t> all(static_cast<size_t>(d.size()));
  for (int64_t i = 0; i < d.size(); ++i) all[static_cast<size_t>(i)] = i;
  const Batch b = d.fetch(all);
  return {as_torch(b.at(kDataInput)), as_torch(b.at(kDataLabels))};
}

}  // namespace

int main(int argc, char** argv) try {
  Args args(argc, argv,
            {{"data-dir", D5_SOURCE_DIR "/../shared/data/mnist"}, {"split", "test"}, {"train-range", "0:8000"},
             {"test-range", "8000:10000"}, {"rounds", "6"}, {"batch", "64"}, {"lr", "0.001"},
             {"optimizer", "torch-adam"}, {"target", "0.97"}, {"max-epochs", "20"}, {"threads", "0"}, {"seed", "1"},
             {"json", ""}});
  register_builtin_operators();
  register_builtin_backends();
  if (args.integer("threads") > 0) set_num_threads(args.integer("threads"));
  const auto train = open_mnist(args.str("data-dir"), args.str("split"), args.str("train-range"));
  const auto test = open_mnist(args.str("data-dir"), args.str("split"), args.str("test-range"));
  const auto [train_x, train_y] = whole(*train);
  const auto [test_x, test_y] = whole(*test);
  Setup s{train.get(), test.get(), args.integer("batch"), args.number("lr"), args.number("target"),
          args.integer("max-epochs"), static_cast<uint64_t>(args.integer("seed")), args.str("optimizer")};
  std::cout << fmt::format(
      "LeNet-5, MNIST {} {} train / {} test, batch {}, {} lr {}, target {}, ATen threads {}\n", args.str("split"),
      args.str("train-range"), args.str("test-range"), s.batch, s.optimizer, s.lr, s.target, at::get_num_threads());

  std::vector<double> wall_ratio, train_ratio, step_ratio;
  nlohmann::json rounds = nlohmann::json::array();
  const int n = args.integer("rounds");
  // Round -1 warms both sides up (first allocations, ATen's lazy initialization) and is discarded.
  for (int round = -1; round < n; ++round) {
    RunResult d, t;
    if (round % 2 != 0) {
      d = run_d5(s);
      t = run_torch(s, train_x, train_y, test_x, test_y);
    } else {
      t = run_torch(s, train_x, train_y, test_x, test_y);
      d = run_d5(s);
    }
    std::cout << fmt::format(
        "round {}: d5 {} in {} epochs, {:.3f} s wall ({:.3f} s training), step {:.3f} ms (fetch {:.3f} ms) | "
        "libtorch {} in {} epochs, {:.3f} s wall ({:.3f} s training), step {:.3f} ms\n",
        round, d.reached ? "reached" : "missed", d.epochs, d.wall_tta_s, d.train_tta_s, d.median_step_s * 1e3,
        d.median_data_s * 1e3, t.reached ? "reached" : "missed", t.epochs, t.wall_tta_s, t.train_tta_s, t.median_step_s * 1e3);
    if (round < 0) continue;
    rounds.push_back({{"d5", {{"reached", d.reached}, {"epochs", d.epochs}, {"wall_tta_s", d.wall_tta_s},
                              {"train_tta_s", d.train_tta_s}, {"median_step_s", d.median_step_s}}},
                      {"libtorch", {{"reached", t.reached}, {"epochs", t.epochs}, {"wall_tta_s", t.wall_tta_s},
                                    {"train_tta_s", t.train_tta_s}, {"median_step_s", t.median_step_s}}}});
    step_ratio.push_back(d.median_step_s / t.median_step_s);
    if (d.reached && t.reached) {
      wall_ratio.push_back(d.wall_tta_s / t.wall_tta_s);
      train_ratio.push_back(d.train_tta_s / t.train_tta_s);
    }
  }
  std::cout << "d5 / libtorch, median [95% CI] over rounds:\n";
  if (!wall_ratio.empty()) {
    std::cout << "  time to accuracy (wall, with test passes): " << with_ci(wall_ratio) << "  (target <= 1.05)\n";
    std::cout << "  time to accuracy (training time):          " << with_ci(train_ratio) << "\n";
  } else {
    std::cout << "  time to accuracy: not compared (a side missed the target in every round)\n";
  }
  std::cout << "  time per step:                             " << with_ci(step_ratio) << "\n";
  if (!args.str("json").empty()) {
    nlohmann::json j = {{"rounds", rounds}, {"wall_tta_ratio", wall_ratio}, {"train_tta_ratio", train_ratio},
                        {"step_ratio", step_ratio}};
    std::ofstream(args.str("json")) << j.dump(2) << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_training: " << e.what() << "\n";
  return 1;
}
