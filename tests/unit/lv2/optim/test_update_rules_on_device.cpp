// The built-in rules on parameters that live on a device, through the host-memory test device
// with a FusedUpdates that runs the host's loops on its records: what the optimizers hand a device
// (one apply per step, state buffers created and kept there, nothing copied in steady state,
// checkpoints through the host) without a GPU. The GPU's own kernels are checked against the
// host in d5_test_cuda with the same cases.
#include <gtest/gtest.h>

#include "../../device_update_check.h"
#include "../../test_memory_updates.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"

namespace d5 {
namespace {

class UpdateRulesOnDevice : public ::testing::TestWithParam<test::DeviceUpdateCase> {
 protected:
  void SetUp() override { register_builtin_backends(); }
};

TEST_P(UpdateRulesOnDevice, TwentyStepsEqualTheHostWithOneApplyPerStepAndNoCopies) {
  const auto& c = GetParam();
  auto fused = test::updates_on_test_memory();
  auto memory = test::test_memory_allocator();
  constexpr int kSteps = 20;
  test::UpdateRun device(c, test::test_memory_device(), kSteps), host(c, Device::cpu(), kSteps);
  device.step(0);
  host.step(0);
  // From the second step on, the state exists where the parameters are: nothing moves.
  const int to_host = memory->copies_to_host, from_host = memory->copies_from_host, applies = fused->applies;
  for (int s = 1; s < kSteps; ++s) {
    device.step(s);
    host.step(s);
  }
  EXPECT_EQ(memory->copies_to_host, to_host);
  EXPECT_EQ(memory->copies_from_host, from_host);
  // Every parameter's update in one apply per step (AcceleGrad: its preparation too).
  EXPECT_EQ(fused->applies - applies, (kSteps - 1) * (c.optimizer == "accelegrad" ? 2 : 1));
  const test::UpdateComparison cmp = test::compare_runs(device, host);
  EXPECT_EQ(cmp.worst_param, 0.0) << "the same loops on the same values";
  EXPECT_EQ(cmp.worst_state, 0.0);
  EXPECT_EQ(cmp.bitwise_equal, cmp.elements);
}

TEST_P(UpdateRulesOnDevice, ACheckpointTakenOnTheDeviceResumesThere) {
  const auto& c = GetParam();
  test::updates_on_test_memory();
  constexpr int kSteps = 10;
  test::UpdateRun first(c, test::test_memory_device(), kSteps), host(c, Device::cpu(), kSteps);
  for (int s = 0; s < kSteps / 2; ++s) first.step(s);
  const OptimizerState saved = first.optimizer->state();  // on the host
  // A new optimizer with the saved state continues on the parameters the first one left.
  test::UpdateRun resumed(c, test::test_memory_device(), kSteps);
  resumed.params = first.params;
  resumed.optimizer->load_state(saved);
  for (int s = kSteps / 2; s < kSteps; ++s) resumed.step(s);
  for (int s = 0; s < kSteps; ++s) host.step(s);
  const test::UpdateComparison cmp = test::compare_runs(resumed, host);
  EXPECT_EQ(cmp.worst_param, 0.0);
  EXPECT_EQ(cmp.worst_state, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Rules, UpdateRulesOnDevice, ::testing::ValuesIn(test::device_update_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(UpdateRulesOnDevice, ADeviceWithoutUpdateKernelsIsRefusedWithTheReason) {
  register_builtin_backends();
  const Device bare = test::test_memory_device(0, "testmem-bare");
  test::DeviceUpdateCase c{"adam", "adam", {}};
  test::UpdateRun run(c, bare, 1);
  try {
    run.step(0);
    FAIL() << "expected a refusal";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no update kernels are registered for that device"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("testmem-bare:0"), std::string::npos) << e.what();
  }
  // A gradient on another device than its parameter is named too.
  test::UpdateRun host(c, Device::cpu(), 1);
  host.grads[0][0] = host.grads[0][0].to(test::test_memory_device());
  test::updates_on_test_memory();
  EXPECT_THROW(host.step(0), InvalidArgument);
}

}  // namespace
}  // namespace d5
