// Every distributed scheme with parameters and gradients on a device that MPI cannot read: the
// MLP's Gemm and Relu run on "guardmem" (guarded_memory_device.h), whose memory is mapped
// PROT_NONE for the host, with resident parameters, as a network on a GPU trains. Each scheme
// must stage its tensors through host memory: a host read of device memory by d5 or by MPI ends
// the rank with SIGSEGV. The oracle is the same scheme on the host, which the serial simulations
// (test_scheme_oracles_mpi.cpp) check: the device run computes with the same kernels on host
// copies and must equal it bit for bit. The staged copies are counted apart from the payload,
// which must equal the host run's call for call. With a library that reaches the device
// (guarded_memory_collectives.h, as NCCL reaches a GPU) the same schemes reduce their tensors
// where they lie and stage only what the library lacks.
#include <gtest/gtest.h>

#include "../backends/cuda_test_util.h"
#include "../guarded_memory_device.h"
#include "../on_test_device.h"
#include "deep500/dist/device_aware_communicator.h"
#include "deep500/dist/distributed_metrics.h"
#include "deep500/dist/host_staging.h"
#include "deep500/dist/nccl.h"
#include "deep500/net/operator_executor.h"
#include "distributed_test_harness.h"
#include "guarded_memory_collectives.h"

namespace d5 {
namespace {

class DeviceSchemes : public DistributedOptimizerTest {
 protected:
  static void SetUpTestSuite() {
    register_builtin_operators();
    test::register_reference_on_device("guarddev", test::guarded_memory_device(), {"Gemm", "Relu"},
                                       "reference kernels on the tests' guarded device memory");
    register_executor("guarddev", [](Network& n, const ExecutorOptions&) -> std::unique_ptr<GraphExecutor> {
      OperatorExecutorOptions o;
      o.resident_parameters = true;
      return std::make_unique<OperatorExecutor>(n, "guarddev", std::vector<std::string>{"guarddev", "reference"}, o);
    });
  }

  struct Run {
    std::vector<float> params;
    CommunicationVolume volume;
  };
  Run train(const Dist& d, const std::string& optimizer, const Hyperparameters& h, const std::string& backend,
            std::shared_ptr<Communicator> via = nullptr) {
    Communicator& c = via ? *via : *comm;
    c.barrier();
    c.volume().reset();
    Run r;
    r.params = distributed(d, optimizer, h, nullptr, via, backend);
    r.volume = c.volume();
    return r;
  }

  // MPI's world with the guardmem library beside it.
  std::shared_ptr<DeviceAwareCommunicator> device_aware() {
    auto library = std::make_unique<test::GuardedMemoryCollectives>(comm);
    library_ = library.get();
    return std::make_shared<DeviceAwareCommunicator>(comm, std::move(library));
  }
  test::GuardedMemoryCollectives* library_ = nullptr;

  // The scheme on guardmem equals the scheme on the host; the device run staged, the host run did
  // not, and both exchanged the same payload in the same calls.
  void check(const Dist& d, const std::string& optimizer, const Hyperparameters& h) {
    const std::string what = d.scheme + " with " + optimizer;
    const Run host = train(d, optimizer, h, "reference");
    const Run device = train(d, optimizer, h, "guarddev");
    ASSERT_EQ(exec->network().fetch_tensor(exec->network().get_params()[0]).device(), test::guarded_memory_device())
        << what << ": the parameters did not stay on the device";
    EXPECT_EQ(device.params, host.params) << what;
    EXPECT_EQ(host.volume.staging().copies_to_host, 0) << what;
    EXPECT_GT(device.volume.staging().bytes_to_host, 0) << what;
    for (const auto& [op, c] : host.volume.collectives()) {
      ASSERT_TRUE(device.volume.collectives().count(op)) << what << ": " << op;
      EXPECT_EQ(device.volume.collectives().at(op).calls, c.calls) << what << ": " << op;
      EXPECT_EQ(device.volume.collectives().at(op).bytes, c.bytes) << what << ": " << op;
    }
    EXPECT_EQ(device.volume.bytes_sent(), host.volume.bytes_sent()) << what;
  }
};

const Hyperparameters kSgd = {{"lr", 0.1}}, kMomentum = {{"lr", 0.05}, {"momentum", 0.9}};

TEST_F(DeviceSchemes, GradientAllreduceStagesEveryBucketShape) {
  check(Dist{"dsgd", {}}, "momentum", kMomentum);                              // overlapped with backprop
  check(Dist{"dsgd", {{"overlap", 0}}}, "sgd", kSgd);                          // fused buckets after it
  check(Dist{"dsgd", {{"overlap", 0}, {"bucket_mb", 0}}}, "sgd", kSgd);        // one tensor per call
  check(Dist{"dsgd", {{"overlap", 1}, {"fuse_kb", 1024}}}, "adam", {{"lr", 0.01}});  // every gradient fused
}

TEST_F(DeviceSchemes, ServerAndStaleSchemesStage) {
  check(Dist{"pssgd", {}}, "momentum", kMomentum);
  check(Dist{"ssgd", {{"staleness", 2}}}, "sgd", kSgd);
  check(Dist{"asgd", {{"fixed_order", 1}}}, "momentum", kMomentum);
}

TEST_F(DeviceSchemes, ModelMixingSchemesStage) {
  check(Dist{"mavg", {{"average_every", 2}}}, "momentum", kMomentum);
  check(Dist{"dpsgd", {}}, "sgd", kSgd);
  check(Dist{"sparse", {{"topk", 0.01}}}, "sgd", kSgd);  // index-value pairs
  check(Dist{"sparse", {{"topk", 0.9}}}, "sgd", kSgd);   // the dense switch
}

// The staged bytes of gradient allreduce are what the arithmetic says: every gradient to the host
// and back once per step, and the first step's broadcast of the parameters on the other ranks.
TEST_F(DeviceSchemes, StagingCountsEveryGradientTwicePerStep) {
  const Run device = train(Dist{"dsgd", {{"overlap", 0}}}, "sgd", kSgd, "guarddev");
  int64_t gradient_bytes = 0;
  for (const Tensor& g : gradient_tensors(exec->network())) gradient_bytes += static_cast<int64_t>(g.bytes());
  const StagingVolume& s = device.volume.staging();
  EXPECT_EQ(s.bytes_to_host, kSteps * gradient_bytes);
  // The first broadcast reaches the parameters on the host: the executor moves them to the device
  // in its first call, after it.
  EXPECT_EQ(s.bytes_from_host, kSteps * gradient_bytes);
  EXPECT_EQ(s.copies_to_host, s.copies_from_host);
  const auto m = rank_metrics(*comm, *dist, TrainingResult{});
  EXPECT_EQ(m["staged_bytes_per_step"].get<double>(), 2.0 * static_cast<double>(gradient_bytes));
  const auto j = device.volume.to_json();
  EXPECT_EQ(j["staging"]["bytes_to_host"], s.bytes_to_host);
  EXPECT_EQ(j["staging"]["copies_from_host"], s.copies_from_host);
}

// A communicator's tensor calls on device memory, one at a time: results on every rank as MPI's
// on host copies.
TEST_F(DeviceSchemes, TensorCollectivesOnDeviceMemory) {
  const Device device = test::guarded_memory_device();
  const int n = comm->size(), me = comm->rank();
  Tensor host(DType::f32, Shape({5}));
  for (int64_t i = 0; i < 5; ++i) host.set(i, static_cast<double>(me * 10 + i));
  Tensor t = host.to(device);
  comm->allreduce(t, ReduceOp::sum);
  Tensor back = t.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(back.get(i), 10.0 * n * (n - 1) / 2 + static_cast<double>(n * i));
  Tensor u = host.to(device);
  auto request = comm->iallreduce(u, ReduceOp::mean);
  request->wait();
  back = u.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(static_cast<float>(back.get(i)), 5.0f * static_cast<float>(n - 1) + static_cast<float>(i));
  Tensor b = host.to(device);
  comm->broadcast(b, n - 1);
  back = b.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(back.get(i), static_cast<double>((n - 1) * 10 + i));
  EXPECT_FALSE(comm->reaches(device));
  EXPECT_TRUE(comm->reaches(Device::cpu()));
}

// On a GPU: the ranks of this test share one, as the schemes' staged path allows (NCCL refuses two
// ranks on one device). The cuda executor's kernels round otherwise than the reference's, so the
// parameters are compared within the harness's float tolerance, not bit for bit.
TEST_F(DeviceSchemes, RanksSharingOneGpuTrainThroughHostStaging) {
  D5_REQUIRE_GPU();
  for (const Dist& d : {Dist{"dsgd", {}}, Dist{"pssgd", {}}, Dist{"mavg", {{"average_every", 2}}}, Dist{"dpsgd", {}}}) {
    const Run host = train(d, "momentum", kMomentum, "reference");
    const Run gpu = train(d, "momentum", kMomentum, "cuda");
    const Device where = exec->network().fetch_tensor(exec->network().get_params()[0]).device();
    EXPECT_EQ(where.kind, device_kind_named("cuda")) << d.scheme << ": parameters on " << where.to_string();
    expect_close(gpu.params, host.params, d.scheme + " on cuda");
    EXPECT_GT(gpu.volume.staging().bytes_to_host, 0) << d.scheme;
  }
}

// The Tensor calls on device memory through a library that reaches it: values as MPI's, nothing
// staged, the library's calls counted as device calls, and a mean handed to the library whole (a
// host division of the PROT_NONE memory would end the rank).
TEST_F(DeviceSchemes, ADeviceLibraryReducesDeviceTensorsWhereTheyLie) {
  auto c = device_aware();
  EXPECT_EQ(c->name(), "guardlib + " + comm->name());
  EXPECT_TRUE(c->reaches(test::guarded_memory_device()));
  EXPECT_TRUE(c->reaches(Device::cpu()));
  const int n = c->size(), me = c->rank();
  Tensor host(DType::f32, Shape({5}));
  for (int64_t i = 0; i < 5; ++i) host.set(i, static_cast<double>(me * 10 + i));
  Tensor t = host.to(test::guarded_memory_device());
  c->allreduce(t, ReduceOp::sum);
  Tensor back = t.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(back.get(i), 10.0 * n * (n - 1) / 2 + static_cast<double>(n * i));
  Tensor u = host.to(test::guarded_memory_device());
  c->iallreduce(u, ReduceOp::mean)->wait();
  back = u.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(static_cast<float>(back.get(i)), 5.0f * static_cast<float>(n - 1) + static_cast<float>(i));
  Tensor b = host.to(test::guarded_memory_device());
  c->broadcast(b, n - 1);
  back = b.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(back.get(i), static_cast<double>((n - 1) * 10 + i));
  std::vector<double> on_host = {1.0 * me, 2.0};
  c->allreduce(std::span<double>(on_host), ReduceOp::max);
  EXPECT_EQ(on_host, (std::vector<double>{n - 1.0, 2.0}));

  EXPECT_EQ(library_->calls, 3);
  EXPECT_EQ(library_->means, 1);
  EXPECT_EQ(library_->divisions, 0);
  // A group mixing device and host memory: the communicator takes the mean itself, dividing each
  // buffer where it lies.
  Tensor g = host.to(test::guarded_memory_device());
  std::vector<float> h = {1.0f * me, 2};
  const std::vector<void*> group = {g.data(), h.data()};
  const std::vector<int64_t> counts = {5, 2};
  c->iallreduce_group(group, counts, DType::f32, ReduceOp::mean)->wait();
  back = g.to(Device::cpu());
  for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(static_cast<float>(back.get(i)), 5.0f * static_cast<float>(n - 1) + static_cast<float>(i));
  EXPECT_FLOAT_EQ(h[0], static_cast<float>(n - 1) / 2);
  EXPECT_EQ(library_->groups, 1);
  EXPECT_EQ(library_->divisions, 1);
  const CommunicationVolume& v = c->volume();
  EXPECT_EQ(v.staging().copies_to_host + v.staging().copies_from_host, 0);
  EXPECT_EQ(v.collectives().at("allreduce").calls, 2);
  EXPECT_EQ(v.collectives().at("allreduce").device_calls, 1);
  EXPECT_EQ(v.collectives().at("allreduce").device_bytes, 20);
  EXPECT_EQ(v.collectives().at("iallreduce").device_calls, 2);
  EXPECT_EQ(v.collectives().at("broadcast").device_bytes, 20);
  EXPECT_EQ(v.to_json()["collectives"]["allreduce"]["device_calls"], 1);
}

// A call the library lacks is refused on device memory before MPI could read it.
TEST_F(DeviceSchemes, ADeviceAwareCommunicatorRefusesDeviceMemoryWhereItsLibraryHasNoCall) {
  auto c = device_aware();
  Tensor t = Tensor(DType::f32, Shape({4})).to(test::guarded_memory_device());
  std::vector<float> all(static_cast<size_t>(4 * c->size()));
  try {
    c->allgather(t.data(), 4, DType::f32, all.data());
    FAIL() << "allgather took device memory";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("allgather has no guardlib path"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c->send(t.data(), 4, DType::f32, (c->rank() + 1) % c->size()), Unimplemented);
  c->barrier();
}

// Every scheme through the device library equals the host run (the library's wire is MPI on the
// same values). The library reduces gradients one tensor per call where the host run packs them,
// and MPI picks its reduction order by message size: a sum of two ranks is the same either way,
// bit for bit; of three it may round otherwise, within the harness's float tolerance.
TEST_F(DeviceSchemes, EverySchemeTrainsThroughADeviceLibrary) {
  const std::vector<std::pair<Dist, std::string>> cases = {
      {Dist{"dsgd", {}}, "momentum"},
      {Dist{"dsgd", {{"overlap", 0}, {"bucket_mb", 0}}}, "sgd"},
      {Dist{"dsgd", {{"overlap", 1}, {"fuse_kb", 0}}}, "adam"},
      {Dist{"pssgd", {}}, "momentum"},
      {Dist{"ssgd", {{"staleness", 2}}}, "sgd"},
      {Dist{"asgd", {{"fixed_order", 1}}}, "momentum"},
      {Dist{"mavg", {{"average_every", 2}}}, "momentum"},
      {Dist{"dpsgd", {}}, "sgd"},
      {Dist{"sparse", {{"topk", 0.01}}}, "sgd"},
  };
  for (const auto& [d, optimizer] : cases) {
    const Hyperparameters h = optimizer == "adam" ? Hyperparameters{{"lr", 0.01}} : optimizer == "sgd" ? kSgd : kMomentum;
    const Run host = train(d, optimizer, h, "reference");
    const Run device = train(d, optimizer, h, "guarddev", device_aware());
    if (comm->size() == 2) {
      EXPECT_EQ(device.params, host.params) << d.scheme;
    } else {
      expect_close(device.params, host.params, d.scheme + " through the device library");
    }
  }
}

// Gradient allreduce through a library that reaches the gradients' device copies nothing through
// the host, whatever the bucket options: gradients it reaches are never packed into a host bucket
// but reduced where they lie, a bucket of them as one grouped call, and every step's gradient
// bytes are the library's.
TEST_F(DeviceSchemes, GradientAllreduceThroughADeviceLibraryStagesNothing) {
  int64_t gradient_bytes = 0;
  for (const Dist& d : {Dist{"dsgd", {}}, Dist{"dsgd", {{"overlap", 0}}}, Dist{"dsgd", {{"overlap", 0}, {"bucket_mb", 0}}},
                        Dist{"dsgd", {{"overlap", 1}, {"fuse_kb", 1024}}}}) {
    const Run device = train(d, "sgd", kSgd, "guarddev", device_aware());
    if (gradient_bytes == 0) {
      for (const Tensor& g : gradient_tensors(exec->network())) gradient_bytes += static_cast<int64_t>(g.bytes());
    }
    const StagingVolume& s = device.volume.staging();
    EXPECT_EQ(s.copies_to_host + s.copies_from_host, 0) << "dsgd " << testing::PrintToString(d.set);
    int64_t device_bytes = 0;
    for (const auto& [op, c] : device.volume.collectives()) {
      if (op == "allreduce" || op == "iallreduce") device_bytes += c.device_bytes;
    }
    EXPECT_EQ(device_bytes, kSteps * gradient_bytes) << "dsgd " << testing::PrintToString(d.set);
    // The MLP's gradients are all small: fused into grouped calls unless buckets are off.
    if (d.set.count("bucket_mb")) {
      EXPECT_EQ(library_->groups, 0);
    } else {
      EXPECT_GE(library_->groups, kSteps) << "dsgd " << testing::PrintToString(d.set);
    }
  }
}

// NCCL refuses ranks without a GPU of their own before it is asked, every rank alike; each build
// checks the case it can: no NCCL, no GPU, or this test's ranks sharing the machine's GPU.
TEST_F(DeviceSchemes, NcclRefusesRanksWithoutAGpuOfTheirOwn) {
  try {
    make_nccl_collectives(*comm);
    FAIL() << "NCCL accepted " << comm->size() << " ranks on one machine";
  } catch (const NotBuilt& e) {
    EXPECT_TRUE(nccl_build_version().empty()) << e.what();
  } catch (const Unimplemented& e) {
    const std::string why = test::no_gpu_reason();
    const std::string expected = why.empty() ? "share GPU GPU-" : "no CUDA device on rank(s) 0, 1";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  comm->barrier();
}

}  // namespace
}  // namespace d5
