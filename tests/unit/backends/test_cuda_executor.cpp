// The cuda executor on a GPU: a LeNet-5 training step validated against the reference executor,
// then five optimizer steps on each with the parameters compared, and the copies a steady-state
// step makes counted (the feeds in, the outputs read back; parameters and gradients stay).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "deep500/core/rng.h"
#include "deep500/net/executor_validation.h"
#include "deep500/net/model_zoo.h"
#include "deep500/net/operator_executor.h"
#include "deep500/net/tensor_names.h"
#include "deep500/train/optimizer.h"

namespace d5 {
namespace {


TEST(CudaExecutor, WithoutADeviceItIsRefusedWithTheReason) {
  if (test::no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a CUDA device";
  register_builtin_operators();  // and the executors
  Network net = test::lenet_training_network();
  const auto executors = executor_backends();
  EXPECT_EQ(std::count(executors.begin(), executors.end(), "cuda"), 0);
  try {
    make_executor(net, "cuda");
    FAIL() << "expected a refusal";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("the cuda executor cannot run here"), std::string::npos) << e.what();
  }
}

TEST(CudaExecutor, LeNetTrainsOnTheGpuAsOnTheReferenceCopyingOnlyFeedsAndOutputs) {
  D5_REQUIRE_GPU();
  register_builtin_operators();
  Network on_gpu = test::lenet_training_network(), on_host = test::lenet_training_network();
  const TensorMap feeds = test::lenet_feeds(on_host, 7, "cuda-executor-input");
  auto gpu = make_executor(on_gpu, "cuda");
  ReferenceExecutor host(on_host);
  const ForwardCheckResult check = test_executor_backprop(*gpu, feeds, kZooLoss, host);
  EXPECT_EQ(check.state, CaseState::Passed) << check.detail;
  for (const auto& [node, why] : gpu->fallbacks()) ADD_FAILURE() << node << " ran on the host: " << why;

  auto gpu_opt = make_optimizer("momentum", {{"lr", 0.05}});
  auto host_opt = make_optimizer("momentum", {{"lr", 0.05}});
  for (int s = 0; s < 5; ++s) {
    gpu_opt->step(*gpu, feeds, kZooLoss);
    host_opt->step(host, feeds, kZooLoss);
  }
  // Steady state: the two feeds in, the two outputs (logits, loss) out.
  EXPECT_EQ(gpu->memory().transfers, 4);
  double worst = 0;
  for (const auto& p : on_host.get_params()) {
    const Tensor g = on_gpu.fetch_tensor(p);
    ASSERT_EQ(g.device(), Device::cuda(0)) << p;
    const Tensor a = g.to(Device::cpu()), b = on_host.fetch_tensor(p);
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < b.numel(); ++i) {
      diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
      scale = std::max(scale, std::abs(b.get(i)));
    }
    worst = std::max(worst, diff / scale);
  }
  // Five steps of float32 sums in cuDNN's and the reference's orders.
  EXPECT_LE(worst, 1e-4);
  std::printf("[ lenet5 cuda ] 5 momentum steps: parameters within %.3g of the reference (l-inf relative); "
              "%lld copies, %lld bytes per steady-state step\n",
              worst, static_cast<long long>(gpu->memory().transfers),
              static_cast<long long>(gpu->memory().transfer_bytes));
}

}  // namespace
}  // namespace d5

