// Distributed schemes on 2 and 3 ranks against one process: N ranks with batch b each must end
// where one process with batch N x b ends (DSGD and every scheme that reduces to it), within
// float rounding of the different summation order.
#include <gtest/gtest.h>

#include <cmath>

#include "distributed_test_harness.h"
#include "ring_allreduce.h"

namespace d5 {
namespace {

const Hyperparameters kSgd = {{"lr", 0.1}};

TEST_F(DistributedOptimizerTest, DsgdEqualsOneProcessWithTheGlobalBatch) {
  const auto want = one_process("sgd", kSgd);
  Dist o;
  const auto got = distributed(o, "sgd", kSgd);
  EXPECT_TRUE(ranks_agree(got));
  expect_close(got, want, "dsgd");
  // The parameters moved: the comparison is not between two initial states.
  EXPECT_NE(got, flat_params(mlp(kPerRank)));
}

TEST_F(DistributedOptimizerTest, DsgdPerTensorAndWithMomentum) {
  Dist o;
  o.set["bucket_mb"] = 0;
  expect_close(distributed(o, "sgd", kSgd), one_process("sgd", kSgd), "dsgd per tensor");
  const Hyperparameters m = {{"lr", 0.05}, {"momentum", 0.9}};
  o.set["bucket_mb"] = 1;
  expect_close(distributed(o, "momentum", m), one_process("momentum", m), "dsgd momentum");
}

// Per-tensor buckets on the reference executor: from the second step on, every gradient's
// allreduce starts inside the backward pass, the last one's (the first layer) included.
TEST_F(DistributedOptimizerTest, DsgdStartsAllreducesDuringBackprop) {
  Dist o;
  o.set["bucket_mb"] = 0;
  const auto with_overlap = distributed(o, "sgd", kSgd);
  const auto* d = dynamic_cast<const ConsistentDecentralized*>(dist.get());
  ASSERT_NE(d, nullptr);
  ASSERT_NE(d->overlap(), nullptr);
  EXPECT_EQ(d->overlap()->planned_buckets(), parameter_tensors(*net).size());
  EXPECT_EQ(d->overlap()->started_during_backprop(), d->overlap()->planned_buckets());
  o.set["overlap"] = 0;
  const auto without = distributed(o, "sgd", kSgd);
  EXPECT_EQ(dynamic_cast<const ConsistentDecentralized*>(dist.get())->overlap(), nullptr);
  // The same sums, started earlier. Overlap uses MPI's nonblocking allreduce and the other path
  // its blocking one; their algorithms may add three or more ranks' values in different orders.
  if (comm->size() == 2) {
    EXPECT_EQ(with_overlap, without) << "a + b is exact either way";
  } else {
    expect_close(with_overlap, without, "overlapped vs after backprop");
  }
}

// Blocking (after backprop, and the first step, which learns the order) and nonblocking
// (overlapped) allreduces together.
CollectiveVolume allreduces(const CommunicationVolume& v) {
  CollectiveVolume sum;
  for (const char* name : {"allreduce", "iallreduce"}) {
    if (!v.collectives().count(name)) continue;
    sum.calls += v.collectives().at(name).calls;
    sum.bytes += v.collectives().at(name).bytes;
  }
  return sum;
}

TEST_F(DistributedOptimizerTest, DsgdCountsTheGradientBytesPerStep) {
  Dist o;
  o.set["bucket_mb"] = 0;
  DistributedOptimizer* d = nullptr;
  distributed(o, "sgd", kSgd, &d);
  const int64_t grad_bytes = static_cast<int64_t>(flat_params(*net).size() * sizeof(float));
  EXPECT_EQ(allreduces(comm->volume()).bytes, grad_bytes * kSteps);
  EXPECT_EQ(allreduces(comm->volume()).calls, static_cast<int64_t>(parameter_tensors(*net).size()) * kSteps);
  ASSERT_EQ(d->times().step_s.size(), static_cast<size_t>(kSteps));
  comm->volume().reset();
  o.set["bucket_mb"] = 25;
  o.set["fuse_kb"] = 25 * 1024;
  distributed(o, "sgd", kSgd);
  EXPECT_EQ(allreduces(comm->volume()).calls, kSteps) << "one bucket holds the whole MLP";
  EXPECT_EQ(allreduces(comm->volume()).bytes, grad_bytes * kSteps);
}

// Only tensors under the fusion threshold are packed; a larger one is reduced alone, and bucket
// capacity still splits the small ones. Every tensor ends as the mean over ranks either way.
TEST_F(DistributedOptimizerTest, BucketsFuseOnlySmallTensors) {
  const auto make = [&](int64_t n) {
    Tensor t(DType::f32, {n});
    for (int64_t i = 0; i < n; ++i) t.span<float>()[static_cast<size_t>(i)] = static_cast<float>(comm->rank() * 1000 + i);
    return t;
  };
  // 64 B, 64 B, 8 KiB, 64 B, 64 B: with fusion below 1 KiB, [small small] [big] [small small].
  std::vector<Tensor> ts = {make(16), make(16), make(2048), make(16), make(16)};
  TensorBuckets fused(1 << 20, false, 1024);
  comm->volume().reset();
  fused.allreduce(*comm, ts, ReduceOp::mean);
  EXPECT_EQ(fused.buckets(), 3u);
  EXPECT_EQ(comm->volume().collectives().at("allreduce").calls, 3);
  const double mean_rank = (comm->size() - 1) / 2.0;
  for (const auto& t : ts)
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_FLOAT_EQ(t.span<float>()[static_cast<size_t>(i)], static_cast<float>(mean_rank * 1000 + i));
  // A capacity of 100 B holds one 64-B tensor: every small tensor alone again.
  TensorBuckets tight(100, true, 1024);
  tight.allreduce(*comm, ts, ReduceOp::sum);
  EXPECT_EQ(tight.buckets(), 5u);
  // The default fuses under 128 KiB: the 8-KiB tensor joins the small ones.
  TensorBuckets by_default(1 << 20);
  by_default.allreduce(*comm, ts, ReduceOp::mean);
  EXPECT_EQ(by_default.buckets(), 1u);
}

TEST_F(DistributedOptimizerTest, ParameterServerEqualsDsgd) {
  Dist o;
  o.scheme = "pssgd";
  const auto got = distributed(o, "momentum", {{"lr", 0.05}, {"momentum", 0.9}});
  EXPECT_TRUE(ranks_agree(got));
  expect_close(got, one_process("momentum", {{"lr", 0.05}, {"momentum", 0.9}}), "pssgd");
}

// Asynchronous: no equivalence to expect, but every push is served, answered, and at the end every
// rank holds the server's parameters; each worker exchanged exactly its gradients and parameters.
TEST_F(DistributedOptimizerTest, AsynchronousParameterServerServesEveryPush) {
  Dist o;
  o.scheme = "asgd";
  const auto got = distributed(o, "sgd", kSgd);
  EXPECT_TRUE(ranks_agree(got));
  EXPECT_NE(got, flat_params(mlp(kPerRank)));
  const int64_t g = static_cast<int64_t>(got.size() * sizeof(float));
  const auto& peers = comm->volume().peers();
  if (comm->rank() == 0) {
    int64_t pushed = 0;
    for (const auto& p : peers) pushed += p.bytes_received;
    EXPECT_EQ(pushed, (comm->size() - 1) * kSteps * g);
    // The server's optimizer applied its own gradient and every worker's.
    EXPECT_EQ(dist->inner().steps(), comm->size() * kSteps);
  } else {
    EXPECT_EQ(peers[0].bytes_sent, kSteps * g);
    // Parameters after each push, plus the initial and the final broadcast.
    EXPECT_EQ(peers[0].bytes_received, kSteps * g + 2 * g);
  }
}

TEST_F(DistributedOptimizerTest, StaleSynchronousWithZeroStalenessEqualsDsgd) {
  Dist o;
  o.scheme = "ssgd";
  o.set["staleness"] = 0;
  expect_close(distributed(o, "sgd", kSgd), one_process("sgd", kSgd), "ssgd s=0");
  // With staleness the ranks still apply the same averaged gradients, only later.
  o.set["staleness"] = 2;
  const auto late = distributed(o, "sgd", kSgd);
  EXPECT_TRUE(ranks_agree(late));
  // SGD applies the same sum of updates in a different order at different points: the parameters
  // differ from the synchronous run, but after finish() every gradient was applied.
  EXPECT_NE(late, one_process("sgd", kSgd));
}

TEST_F(DistributedOptimizerTest, ModelAverageEveryStepEqualsDsgdForSgd) {
  Dist o;
  o.scheme = "mavg";
  o.set["average_every"] = 1;
  expect_close(distributed(o, "sgd", kSgd), one_process("sgd", kSgd), "mavg k=1");
  o.set["average_every"] = 4;
  const auto local = distributed(o, "sgd", kSgd);
  EXPECT_TRUE(ranks_agree(local)) << "finish() averages the last local steps";
}

// On two and three ranks every rank's ring neighbours are all the others, so decentralized
// averaging is a full average: with SGD, DSGD.
TEST_F(DistributedOptimizerTest, NeighbourAveragingOnSmallRingsEqualsDsgd) {
  Dist o;
  o.scheme = "dpsgd";
  const auto got = distributed(o, "sgd", kSgd);
  expect_close(got, one_process("sgd", kSgd), "dpsgd");
}

TEST_F(DistributedOptimizerTest, SparseWithEveryElementEqualsDsgd) {
  Dist o;
  o.scheme = "sparse";
  o.set["topk"] = 1.0;
  comm->volume().reset();
  DistributedOptimizer* d = nullptr;
  expect_close(distributed(o, "sgd", kSgd, &d), one_process("sgd", kSgd), "sparse k=100%");
  // Every element from every rank: the pairs would outweigh the dense vector, so every step goes
  // dense (one allreduce of the gradient bytes) and no pair is gathered.
  const auto* sparse_all = dynamic_cast<const SparseAllreduce*>(d);
  ASSERT_NE(sparse_all, nullptr);
  EXPECT_EQ(sparse_all->dense_steps(), kSteps);
  EXPECT_EQ(comm->volume().collective_bytes("allreduce"),
            kSteps * static_cast<int64_t>(flat_params(*net).size() * sizeof(float)));
  EXPECT_EQ(comm->volume().collective_bytes("allgatherv"), 0);
  comm->volume().reset();
  o.set["topk"] = 0.05;
  const auto sparse = distributed(o, "sgd", kSgd);
  EXPECT_TRUE(ranks_agree(sparse));
  const int64_t elements = static_cast<int64_t>(sparse.size());
  const int64_t k = static_cast<int64_t>(std::ceil(0.05 * static_cast<double>(elements)));
  // Per step: k (index, value) pairs from every rank, plus one count each; 5% of the elements from
  // 2 or 3 ranks stays sparse.
  EXPECT_EQ(comm->volume().collective_bytes("allgather"), kSteps * comm->size() * (8 + k * (8 + 4)));
  EXPECT_EQ(dynamic_cast<const SparseAllreduce*>(dist.get())->dense_steps(), 0);
}

// A user's communication scheme (examples/ring_allreduce) under the same optimizer.
TEST_F(DistributedOptimizerTest, DsgdOverTheExampleRingAllreduceEqualsOneProcess) {
  auto ring = std::make_shared<RingAllreduceCommunicator>(comm);
  Dist o;
  o.set["fuse_kb"] = 25 * 1024;
  expect_close(distributed(o, "sgd", kSgd, nullptr, ring), one_process("sgd", kSgd), "dsgd over the ring");
  EXPECT_EQ(allreduces(ring->volume()).calls, kSteps) << "one bucket holds the whole MLP";
  EXPECT_GT(comm->volume().peers()[(comm->rank() + 1) % comm->size()].bytes_sent, 0);
}

TEST_F(DistributedOptimizerTest, UnknownSchemeAndBadOptionsAreRefused) {
  auto message = [&](const std::string& scheme, const SchemeSettings& set, const std::string& optimizer = "sgd") {
    try {
      make_distributed_optimizer(scheme, set, make_optimizer(optimizer), comm);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("telepathy", {}).find("unknown distributed scheme 'telepathy' (known: dsgd, pssgd, asgd, ssgd, mavg, dpsgd, sparse)"),
            std::string::npos);
  EXPECT_NE(message("sparse", {{"topk", 0}}).find("--topk"), std::string::npos);
  EXPECT_NE(message("pssgd", {}, "lbfgs").find("not a three-step optimizer"), std::string::npos);
  // Each scheme takes its own options only, and says which scheme takes the one it refuses.
  EXPECT_NE(message("ssgd", {{"topk", 0.1}}).find("distributed scheme 'ssgd' takes no option 'topk' (it is an "
                                                   "option of sparse)"),
            std::string::npos);
  EXPECT_NE(message("dsgd", {{"colour", 1}}).find("'colour' is not an option of any distributed scheme"),
            std::string::npos);
  EXPECT_NE(message("ssgd", {{"staleness", 2.5}}).find("must be a whole number"), std::string::npos);
  // Defaults fill what is not given; the settings are the scheme's own.
  EXPECT_EQ(scheme_settings("mavg", {}), (SchemeSettings{{"average_every", 1}}));
  EXPECT_EQ(scheme_settings("ssgd", {{"staleness", 3}}), (SchemeSettings{{"staleness", 3}}));
  EXPECT_EQ(scheme_settings("asgd", {}), (SchemeSettings{{"fixed_order", 0}}));
}

}  // namespace
}  // namespace d5
