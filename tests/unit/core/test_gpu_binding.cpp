// One GPU per local rank (gpu_binding.h): the choice from the launcher's local rank, the set
// CUDA_VISIBLE_DEVICES and the driver's GPU count, worked out by hand.
#include <gtest/gtest.h>

#include "deep500/core/error.h"
#include "deep500/core/gpu_binding.h"

namespace d5 {
namespace {

std::optional<std::string> choose(std::optional<int> rank, std::optional<std::string> visible, int gpus,
                                  const std::string& mode = "local-rank") {
  return visible_gpu_for_local_rank(GpuBindingInput{rank, std::move(visible), gpus, mode});
}

TEST(GpuBinding, OutsideALauncherNothingChanges) {
  EXPECT_EQ(choose(std::nullopt, std::nullopt, 8), std::nullopt);
  EXPECT_EQ(choose(std::nullopt, "0,1", 2), std::nullopt);
}

TEST(GpuBinding, LocalRanksTakeTheDriversGpusRoundRobin) {
  EXPECT_EQ(choose(0, std::nullopt, 4), "0");
  EXPECT_EQ(choose(3, std::nullopt, 4), "3");
  EXPECT_EQ(choose(6, std::nullopt, 4), "2");  // more ranks than GPUs: they share
  EXPECT_EQ(choose(1, std::nullopt, 1), std::nullopt);  // one GPU: every rank uses it as it is
  EXPECT_EQ(choose(1, std::nullopt, 0), std::nullopt);  // none
}

TEST(GpuBinding, ASetListIsNarrowedToTheRanksEntry) {
  EXPECT_EQ(choose(0, "3,5", 8), "3");
  EXPECT_EQ(choose(1, "3,5", 8), "5");
  EXPECT_EQ(choose(2, "3,5", 8), "3");
  EXPECT_EQ(choose(1, "GPU-8a1f,GPU-77c2,GPU-0b3e", 0), "GPU-77c2");  // UUIDs pass through
  EXPECT_EQ(choose(1, "7", 8), std::nullopt);  // one entry: the user chose it for every rank
  EXPECT_EQ(choose(1, "", 8), std::nullopt);   // none visible stays none
}

TEST(GpuBinding, OffLeavesTheEnvironmentAndOtherModesAreRefused) {
  EXPECT_EQ(choose(1, "3,5", 8, "off"), std::nullopt);
  EXPECT_EQ(choose(1, std::nullopt, 8, "off"), std::nullopt);
  try {
    choose(1, std::nullopt, 8, "round-robin");
    FAIL() << "an unknown D5_GPU_BINDING was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'local-rank'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d5
