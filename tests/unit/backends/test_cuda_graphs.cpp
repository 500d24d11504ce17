// --cuda-graphs (docs/cuda-graphs.md): the cuda executor's steps recorded as CUDA graphs and
// replayed. On a GPU, replayed LeNet-5 training steps against the same steps run without graphs
// (the same operators and algorithms, so the same values), through optimizer steps that update
// the parameters in place between replays; a step that reads a device value on the host is
// refused by capture and runs as usual. Without a GPU, the recorder's refusal.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "backends/cuda/cuda_common.h"
#include "cuda_test_util.h"
#include "deep500/core/rng.h"
#include "deep500/net/model_zoo.h"
#include "deep500/net/operator_executor.h"
#include "deep500/net/replaying_executor.h"
#include "deep500/net/tensor_names.h"
#include "deep500/train/optimizer.h"

namespace d5 {
namespace {


// max |a - b| / max |b| over the elements (0 when both are zero).
double relative_gap(const Tensor& got, const Tensor& want) {
  const Tensor a = got.to(Device::cpu()), b = want.to(Device::cpu());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
    scale = std::max(scale, std::abs(b.get(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(CudaGraphs, WithoutADeviceTheRecorderSaysWhyAndRunsNothing) {
  if (test::no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a CUDA device";
  register_builtin_operators();
  const StepRecorderFactory factory = step_recorder_for("cuda");
  ASSERT_TRUE(factory) << "the cuda backend registers its recorder";
  auto recorder = factory();
  bool ran = false;
  const std::string why = recorder->record([&] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_FALSE(recorder->recorded());
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  EXPECT_THROW(recorder->replay(), InvalidArgument);
}

// Host code of the recorder, which runs anywhere: outside a recording the operators use the legacy
// stream and check device values at once; inside one, their checks wait for each replay.
TEST(CudaGraphs, HostChecksWaitForTheReplayWhileAStepIsRecorded) {
  EXPECT_EQ(cuda::op_stream(), nullptr);
  EXPECT_EQ(cuda::launch_stream(nullptr), nullptr);
  int ran = 0;
  cuda::check_on_host([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  std::vector<std::function<void()>> deferred;
  {
    cuda::DeferredHostChecks recording(deferred);
    cuda::check_on_host([&] { ran += 10; });
    cuda::check_on_host([&] { ran += 100; });
    EXPECT_EQ(ran, 1);
  }
  ASSERT_EQ(deferred.size(), 2u);
  for (const auto& check : deferred) check();
  EXPECT_EQ(ran, 111);
  cuda::check_on_host([&] { ++ran; });
  EXPECT_EQ(ran, 112) << "after the recording, checks run at once again";
  EXPECT_EQ(deferred.size(), 2u);
}

TEST(CudaGraphs, ReplayedTrainingStepsEqualTheStepsWithoutGraphs) {
  D5_REQUIRE_GPU();
  register_builtin_operators();
  Network replayed_net = test::lenet_training_network(), plain_net = test::lenet_training_network();
  ExecutorOptions with_graphs;
  with_graphs.cuda_graphs = true;
  auto replayed = make_executor(replayed_net, "cuda", with_graphs);
  auto plain = make_executor(plain_net, "cuda");
  auto* replaying = dynamic_cast<ReplayingExecutor*>(replayed.get());
  ASSERT_NE(replaying, nullptr);
  auto replayed_opt = make_optimizer("momentum", {{"lr", 0.05}});
  auto plain_opt = make_optimizer("momentum", {{"lr", 0.05}});
  double worst_output = 0, worst_gradient = 0;
  for (uint64_t step = 0; step < 6; ++step) {
    const TensorMap feeds = test::lenet_feeds(plain_net, step, "cuda-graph-input");
    // Each step updates the parameters in place on the device, which the next replay reads.
    const TensorMap a = replayed_opt->step(*replayed, feeds, kZooLoss);
    const TensorMap b = plain_opt->step(*plain, feeds, kZooLoss);
    for (const auto& [name, value] : b) worst_output = std::max(worst_output, relative_gap(a.at(name), value));
    for (const auto& [param, gradient] : plain_net.gradient())
      worst_gradient = std::max(worst_gradient, relative_gap(replayed_net.fetch_tensor(gradient),
                                                             plain_net.fetch_tensor(gradient)));
  }
  double worst_parameter = 0;
  for (const auto& p : plain_net.get_params())
    worst_parameter = std::max(worst_parameter, relative_gap(replayed_net.fetch_tensor(p), plain_net.fetch_tensor(p)));
  const ReplayReport& r = replaying->report();
  EXPECT_EQ(r.recordings, 1) << r.last_unrecorded_why;
  EXPECT_EQ(r.replays, 5) << r.last_unrecorded_why;
  // The same kernels with the same algorithms in the same order: equal up to cuDNN's choice of
  // algorithm, which both executors make alike; 1e-6 leaves room for a non-deterministic one.
  EXPECT_LE(worst_output, 1e-6);
  EXPECT_LE(worst_gradient, 1e-6);
  EXPECT_LE(worst_parameter, 1e-6);
  // A class index out of range: the replay's deferred check refuses it as the plain step does.
  TensorMap bad = test::lenet_feeds(plain_net, 99, "cuda-graph-input");
  bad.at(kZooLabels).data_as<int64_t>()[3] = 10;
  EXPECT_THROW(plain->inference_and_backprop(bad, kZooLoss), InvalidArgument);
  const int64_t replays_before = r.replays;
  EXPECT_THROW(replayed->inference_and_backprop(bad, kZooLoss), InvalidArgument);
  EXPECT_EQ(r.replays, replays_before + 1) << "the bad step was a replay";
  std::printf("[ lenet5 cuda graphs ] 6 momentum steps, 5 replayed: outputs %.3g, gradients %.3g, parameters %.3g "
              "(l-inf relative to the steps without graphs)\n",
              worst_output, worst_gradient, worst_parameter);
}

// Clip reads its bound from device memory on the host (a synchronous copy), which capture refuses.
TEST(CudaGraphs, AStepThatReadsTheDeviceOnTheHostRunsWithoutAGraphAndSaysWhy) {
  D5_REQUIRE_GPU();
  register_builtin_operators();
  Network net("clip_by_input");
  net.add_input("x", TensorDesc{DType::f32, Shape{4, 4}});
  net.add_input("lo", TensorDesc{DType::f32, Shape{}});
  net.add_node({"clip", "Clip", "", {}, {"x", "lo"}, {"y"}});
  net.add_output("y");
  ExecutorOptions with_graphs;
  with_graphs.cuda_graphs = true;
  auto ex = make_executor(net, "cuda", with_graphs);
  for (int call = 0; call < 3; ++call) {
    Tensor x(TensorDesc{DType::f32, Shape{4, 4}});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(i) - 8.0);
    const Tensor lo = Tensor::from_values<float>(Shape{}, {static_cast<float>(-call)});
    const Tensor y = ex->inference({{"x", x}, {"lo", lo}}).at("y").to(Device::cpu());
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.get(i), std::max(x.get(i), lo.get(0))) << "call " << call;
  }
  const ReplayReport& r = dynamic_cast<ReplayingExecutor&>(*ex).report();
  EXPECT_EQ(r.replays, 0);
  EXPECT_NE(r.last_unrecorded_why.find("cannot be captured as a CUDA graph"), std::string::npos)
      << r.last_unrecorded_why;
}

}  // namespace
}  // namespace d5
