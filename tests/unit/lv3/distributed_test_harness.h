#pragma once
// The training harness of the Level 3 MPI tests: the zoo MLP on a fixed, learnable data set,
// trained for a few steps by one process or by every rank under a distributed scheme.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/rng.h"
#include "deep500/dist/distributed_optimizers.h"
#include "deep500/dist/distributed_sampler.h"
#include "deep500/dist/distributed_schemes.h"
#include "deep500/dist/mpi_world.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/samplers.h"

namespace d5 {
namespace {

// A scheme and the options given to it (the rest take their defaults).
struct Dist {
  std::string scheme = "dsgd";
  SchemeSettings set;
};

constexpr int64_t kFeatures = 12, kClasses = 4, kPerRank = 4, kSamples = 96, kSteps = 6;

// The sampler's next batch, starting a new epoch when the last one ended.
template <typename S>
auto next_rows(S& sampler) {
  auto rows = sampler.next();
  if (rows.empty()) {
    sampler.reset();
    rows = sampler.next();
  }
  return rows;
}

inline Network mlp(int64_t batch) {
  ModelOptions mo;
  mo.batch = batch;
  mo.classes = kClasses;
  mo.input_shape = {kFeatures};
  mo.with_loss = mo.training = true;
  mo.seed = 5;
  return build_model("mlp", mo);
}

// A fixed, learnable data set: the label is the argmax of the first kClasses features.
struct Data {
  std::vector<float> x;
  std::vector<int64_t> y;
  Data() {
    RngStream rng(99, "lv3-test-data");
    for (int64_t i = 0; i < kSamples; ++i) {
      int64_t best = 0;
      for (int64_t f = 0; f < kFeatures; ++f) {
        x.push_back(static_cast<float>(rng.uniform() * 2 - 1));
        if (f < kClasses && x.back() > x[static_cast<size_t>(i * kFeatures + best)]) best = f;
      }
      y.push_back(best);
    }
  }
  TensorMap feeds(const std::vector<int64_t>& rows) const {
    Tensor in(DType::f32, Shape({static_cast<int64_t>(rows.size()), kFeatures}));
    Tensor lab(DType::i64, Shape({static_cast<int64_t>(rows.size())}));
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t f = 0; f < kFeatures; ++f)
        in.data_as<float>()[r * kFeatures + f] = x[static_cast<size_t>(rows[r] * kFeatures + f)];
      lab.data_as<int64_t>()[r] = y[static_cast<size_t>(rows[r])];
    }
    return {{kDataInput, in}, {kDataLabels, lab}};
  }
};

inline std::vector<float> flat_params(const Network& net) { return pack_f32(parameter_tensors(net)); }

class DistributedOptimizerTest : public testing::Test {
 protected:
  void SetUp() override {
    register_builtin_operators();
    comm = mpi_world();
    comm->barrier();
    comm->volume().reset();
  }

  // One process, batch N x b, the plain optimizer, ordered batches.
  std::vector<float> one_process(const std::string& optimizer, const Hyperparameters& h) {
    Network net = mlp(kPerRank * comm->size());
    ExecutorOptions eo;
    eo.deterministic = true;
    auto exec = make_executor(net, "reference", eo);
    auto opt = make_optimizer(optimizer, h);
    OrderedSampler sampler(kSamples, kPerRank * comm->size(), true);
    for (int64_t s = 0; s < kSteps; ++s) {
      const auto rows = next_rows(sampler);
      opt->step(*exec, data.feeds(rows), kZooLoss);
    }
    return flat_params(net);
  }

  // N ranks, batch b each, partitioned ordered batches, the scheme wrapping the optimizer, on the
  // executor of `backend`.
  std::vector<float> distributed(const Dist& o, const std::string& optimizer, const Hyperparameters& h,
                                 DistributedOptimizer** keep = nullptr, std::shared_ptr<Communicator> via = nullptr,
                                 const std::string& backend = "reference") {
    net = std::make_unique<Network>(mlp(kPerRank));
    ExecutorOptions eo;
    eo.deterministic = true;
    exec = make_executor(*net, backend, eo);
    dist = make_distributed_optimizer(o.scheme, o.set, make_optimizer(optimizer, h), via ? via : comm);
    auto ordered = [](int64_t global) { return std::make_unique<OrderedSampler>(kSamples, global, true); };
    DistributedSampler sampler(ordered, kSamples, kPerRank, 0, comm->rank(), comm->size(), Distribution::partitioned);
    for (int64_t s = 0; s < kSteps; ++s) {
      const auto rows = next_rows(sampler);
      dist->step(*exec, data.feeds(rows), kZooLoss);
    }
    dist->finish(*net);
    if (keep != nullptr) *keep = dist.get();
    return flat_params(*net);
  }

  // Every rank holds the same parameters (bitwise: they applied the same update).
  bool ranks_agree(const std::vector<float>& p) {
    std::vector<float> lo = p, hi = p;
    comm->allreduce(std::span<float>(lo), ReduceOp::min);
    comm->allreduce(std::span<float>(hi), ReduceOp::max);
    return lo == p && hi == p;
  }

  static void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    // Float sums of N per-rank means vs one mean over N b rows: a few ulps per step, six steps.
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1e-3 + std::fabs(want[i])));
    EXPECT_LT(worst, 2e-5) << what;
  }

  std::shared_ptr<Communicator> comm;
  Data data;
  std::unique_ptr<Network> net;
  std::unique_ptr<GraphExecutor> exec;
  std::unique_ptr<DistributedOptimizer> dist;
};

}  // namespace
}  // namespace d5
