// `d5 train --dist` on 4 ranks against the schemes' serial simulation (tests/unit/lv3/
// serial_schemes.h), for the settings where a scheme does not reduce to DSGD. The test writes
// the data (an npy data set) and the initial model (an ONNX file) itself, so it knows every input
// of the run: with `--sampler ordered`, rank r's batch at step t is samples (t N + r) b ...
// (t N + r + 1) b - 1. The simulation's gradients come from the reference executor on the same
// imported model; `--save-model` gives rank 0's final parameters.
//
// Tolerance 1e-5 relative to max(|p|, 0.01), as in tests/unit/lv3/test_scheme_oracles_mpi.cpp:
// twenty times the float32 rounding of sums over ranks in another order (worst seen 4e-7), a
// hundredth of what one misplaced step changes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "../unit/lv3/replica_gradient.h"
#include "../unit/lv3/serial_schemes.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/rng.h"
#include "deep500/core/threads.h"
#include "deep500/net/model_zoo.h"
#include "deep500/net/tensor_names.h"
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/train/loss_head.h"
#include "process.h"

namespace d5::test {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kFeatures = 12, kClasses = 4, kBatch = 4, kSamples = 96, kSteps = 6;
constexpr double kTolerance = 1e-5, kFloor = 1e-2;

class CliTrainDistOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_operators();
    set_mpi_launcher_environment();
    // The simulation's gradients on one thread, as the ranks' (--threads 1): the same sums in
    // the same order, so only the scheme's own arithmetic can differ.
    set_num_threads(1);
    write_data();
    ModelOptions mo;
    mo.batch = kBatch;
    mo.classes = kClasses;
    mo.input_shape = {kFeatures};
    mo.seed = 5;
    export_onnx_file(build_model("mlp", mo), path("init.onnx"));
  }
  std::string path(const std::string& name) const { return dir_.file(name); }

  // A learnable set: the label is the argmax of the first kClasses features.
  void write_data() {
    Tensor x(DType::f32, Shape({kSamples, kFeatures}));
    Tensor y(DType::i64, Shape({kSamples}));
    RngStream rng(99, "cli-dist-oracle-data");
    for (int64_t i = 0; i < kSamples; ++i) {
      float* row = x.data_as<float>() + i * kFeatures;
      int64_t best = 0;
      for (int64_t f = 0; f < kFeatures; ++f) {
        row[f] = static_cast<float>(rng.uniform() * 2 - 1);
        if (f < kClasses && row[f] > row[best]) best = f;
      }
      y.data_as<int64_t>()[i] = best;
    }
    write_npy_file(path("inputs.npy"), x);
    write_npy_file(path("labels.npy"), y);
    inputs_ = x;
    labels_ = y;
  }

  TensorMap feeds(int rank, int64_t step) const {
    Tensor in(DType::f32, Shape({kBatch, kFeatures}));
    Tensor lab(DType::i64, Shape({kBatch}));
    const int64_t first = (step * kRanks + rank) * kBatch;
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t f = 0; f < kFeatures; ++f)
        in.data_as<float>()[b * kFeatures + f] = inputs_.data_as<float>()[(first + b) * kFeatures + f];
      lab.data_as<int64_t>()[b] = labels_.data_as<int64_t>()[first + b];
    }
    return {{kDataInput, in}, {kZooLabels, lab}};
  }

  // The model d5 train trains: the ONNX classifier at the batch, with the loss it appends.
  static Network imported(const std::string& file) {
    ImportOptions io;
    io.batch = kBatch;
    Network net = import_onnx_file(file, io);
    append_softmax_cross_entropy(net, kZooLabels, kZooLoss);
    return net;
  }

  // Runs d5 train on 4 ranks and compares rank 0's saved parameters with the simulation's.
  void check(const std::vector<std::string>& dist, const SchemeSpec& spec, const SgdRule& rule) {
    const std::string model = path(spec.scheme + ".onnx"), result = path(spec.scheme + ".json");
    std::vector<std::string> args = {"-n", std::to_string(kRanks), d5_binary(), "--threads", "1", "train",
                                     "--model", path("init.onnx"), "--dataset", "npy", "--data-dir",
                                     dir_.path.string(), "--batch", std::to_string(kBatch), "--steps",
                                     std::to_string(kSteps), "--sampler", "ordered", "--no-test", "--prefetch", "0",
                                     "--lr", std::to_string(rule.lr), "--save-model", model, "--format", "json",
                                     "-o", result};
    if (rule.momentum != 0)
      args.insert(args.end(), {"--optimizer", "momentum", "--momentum", std::to_string(rule.momentum)});
    args.insert(args.end(), dist.begin(), dist.end());
    const ProcessResult r = run_process(D5_MPIEXEC, args);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;

    ReplicaGradient replica(imported(path("init.onnx")), kZooLoss);
    auto gradient = [&](int rank, int64_t t, const Flat& p) { return replica(p, feeds(rank, t)); };
    outcome = simulate_scheme(spec, kRanks, kSteps, replica.parameters(), rule, gradient);
    const Flat got = ReplicaGradient::parameters_of(import_onnx_file(model), replica.names());
    const double diff = worst_relative_difference(got, outcome.params[0], kFloor);
    EXPECT_LT(diff, kTolerance) << spec.scheme;
    std::fprintf(stderr, "%s: worst relative difference %.3g\n", spec.scheme.c_str(), diff);
    // The run is not DSGD in disguise: the tolerance separates the two.
    if (spec.scheme != "dsgd") {
      const SerialOutcome dsgd = simulate_scheme(SchemeSpec{}, kRanks, kSteps, replica.parameters(), rule, gradient);
      EXPECT_GT(worst_relative_difference(outcome.params[0], dsgd.params[0], kFloor), 100 * kTolerance);
    }
    report = nlohmann::json::parse(read_file(result));
  }

  TempDir dir_{"d5-dist-oracle"};
  Tensor inputs_, labels_;
  SerialOutcome outcome;
  nlohmann::json report;
};

const SgdRule kPlain{0.1, 0}, kMomentum{0.05, 0.9};

TEST_F(CliTrainDistOracle, DsgdOnFourRanks) { check({"--dist", "dsgd"}, SchemeSpec{"dsgd"}, kPlain); }

TEST_F(CliTrainDistOracle, StaleSynchronousWithStalenessTwo) {
  SchemeSpec spec{"ssgd"};
  spec.staleness = 2;
  check({"--dist", "ssgd", "--staleness", "2"}, spec, kPlain);
}

TEST_F(CliTrainDistOracle, ModelAverageEveryFourStepsWithMomentum) {
  SchemeSpec spec{"mavg"};
  spec.average_every = 4;
  check({"--dist", "mavg", "--avg-every", "4"}, spec, kMomentum);
}

// Rank 0 mixes with ranks 3 and 1, not 2.
TEST_F(CliTrainDistOracle, NeighbourAveragingOnARingOfFour) {
  check({"--dist", "dpsgd"}, SchemeSpec{"dpsgd"}, kPlain);
}

TEST_F(CliTrainDistOracle, SparseTopFivePercentAndTheDenseSwitch) {
  // 5 % from 4 ranks is 0.6 of the dense bytes: sparse every step; 25 % goes dense every step.
  for (const std::string topk : {"0.05", "0.25"}) {
    SchemeSpec spec{"sparse"};
    spec.topk = std::stod(topk);
    check({"--dist", "sparse", "--topk", topk}, spec, kPlain);
    const auto& ranks = report["cases"][0]["extra"]["distributed"]["ranks"];
    ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
    EXPECT_EQ(ranks[0]["scheme"]["dense_steps"], outcome.dense_steps) << topk;
    EXPECT_EQ(outcome.dense_steps, topk == "0.05" ? 0 : kSteps) << topk;
  }
}

TEST_F(CliTrainDistOracle, AsynchronousServerInRankOrderWithMomentum) {
  check({"--dist", "asgd", "--fixed-order"}, SchemeSpec{"asgd"}, kMomentum);
  EXPECT_EQ(report["cases"][0]["params"]["dist"]["options"]["fixed_order"], 1.0);
}

}  // namespace
}  // namespace d5::test
