// The built-in update rules on cuda:0 (update_kernels.cu) against the host's loops, 20 steps of
// every rule and branch on parameters of one element to several blocks, 30 tensors in two
// launches; and the time of one Adam step over ResNet-50's parameters in multi-tensor launches.
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "../device_update_check.h"
#include "cuda_test_util.h"
#include "deep500/core/device_allocator.h"
#include "deep500/net/model_zoo.h"

namespace d5 {
namespace {

class CudaUpdateRules : public ::testing::TestWithParam<test::DeviceUpdateCase> {};

TEST_P(CudaUpdateRules, TwentyStepsEqualTheHostWithinOneInAHundredThousand) {
  D5_REQUIRE_GPU();
  const auto& c = GetParam();
  constexpr int kSteps = 20;
  test::UpdateRun gpu(c, Device::cuda(0), kSteps), host(c, Device::cpu(), kSteps);
  for (int s = 0; s < kSteps; ++s) {
    gpu.step(s);
    host.step(s);
  }
  const test::UpdateComparison cmp = test::compare_runs(gpu, host);
  // l-infinity relative per tensor; the kernels round as the loops do, so most elements are equal
  // bit for bit (the host's loops may contract a product into an FMA where the kernels do not).
  EXPECT_LE(cmp.worst_param, 1e-5);
  EXPECT_LE(cmp.worst_state, 1e-5);
  std::printf("[ %s ] worst parameter %.3g, worst state %.3g, %lld of %lld parameter elements bitwise equal\n",
              c.label.c_str(), cmp.worst_param, cmp.worst_state, static_cast<long long>(cmp.bitwise_equal),
              static_cast<long long>(cmp.elements));
}

INSTANTIATE_TEST_SUITE_P(Rules, CudaUpdateRules, ::testing::ValuesIn(test::device_update_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(CudaUpdateRulesTiming, AdamOverResNet50sParametersIsTimed) {
  D5_REQUIRE_GPU();
  const Network net = build_model("resnet50");
  std::vector<Tensor> params, grads;
  int64_t elements = 0;
  for (const auto& name : net.get_params()) {
    params.push_back(net.fetch_tensor(name).to(Device::cuda(0)));
    grads.push_back(net.fetch_tensor(name).to(Device::cuda(0)));
    elements += params.back().numel();
  }
  auto adam = make_optimizer("adam", {{"lr", 1e-4}});
  auto& o = dynamic_cast<ThreeStepOptimizer&>(*adam);
  std::vector<ThreeStepOptimizer::ParameterUpdate> updates;
  for (size_t i = 0; i < params.size(); ++i) updates.push_back({grads[i], params[i], "p" + std::to_string(i)});
  for (int s = 0; s < 3; ++s) o.update_all(updates);  // state created, clocks up
  auto timer = allocator_for(Device::cuda(0)).make_timer(0);
  std::vector<double> ms;
  for (int s = 0; s < 20; ++s) {
    timer->start();
    o.update_all(updates);
    timer->stop();
    ms.push_back(timer->seconds() * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  const double median = (ms[9] + ms[10]) / 2;
  // Adam reads p, g, m, v and writes p, m, v: 28 bytes per element.
  const double gbs = 28.0 * static_cast<double>(elements) / (median * 1e-3) / 1e9;
  std::printf("[ adam resnet50 ] %zu tensors, %lld elements: median %.3f ms per step (min %.3f, max %.3f), %.0f GB/s\n",
              params.size(), static_cast<long long>(elements), median, ms.front(), ms.back(), gbs);
  // A measurement (quoted in docs/cuda.md), not a check: the values are checked above.
  EXPECT_EQ(params.size(), 161u);
  EXPECT_EQ(elements, 25'557'032);
}

}  // namespace
}  // namespace d5
