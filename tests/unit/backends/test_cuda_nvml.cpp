// The NVML loader against a stand-in library (fake_nvml.cpp): what it reads, and the reason it
// gives where the library is missing, incomplete, too old or fails to start.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/cuda/nvml.h"

namespace d5::cuda {
namespace {

const std::string kBus = "0000:65:00.0";

// Each test sets the stand-in's environment it needs and clears it after.
class NvmlLoader : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("FAKE_NVML_VERSION");
    unsetenv("FAKE_NVML_INIT");
    unsetenv("FAKE_NVML_REASONS");
  }
};

TEST_F(NvmlLoader, ReadsVersionsClocksMemoryAndAnAdvancingEnergyCounter) {
  std::string reason;
  const auto n = Nvml::open(&reason, D5_FAKE_NVML);
  ASSERT_NE(n, nullptr) << reason;
  EXPECT_EQ(n->version(), "12.535.104");
  EXPECT_EQ(n->driver_version(), "535.104.05");
  EXPECT_EQ(n->ecc_enabled(kBus), std::optional<bool>(true));
  const auto a = n->sample(kBus, &reason);
  const auto b = n->sample(kBus, &reason);
  ASSERT_TRUE(a && b) << reason;
  ASSERT_TRUE(a->energy_mj && b->energy_mj);
  EXPECT_EQ(*b->energy_mj - *a->energy_mj, 1500u);
  EXPECT_EQ(a->sm_clock_mhz, 1980u);
  EXPECT_EQ(a->memory_clock_mhz, 2619u);
  EXPECT_EQ(a->utilization_percent, 87u);
  EXPECT_EQ(a->memory_used_bytes, 10ull << 30);
  EXPECT_EQ(a->memory_total_bytes, 80ull << 30);
}

TEST_F(NvmlLoader, ClockEventReasonsNameOnlyThrottling) {
  // Idle (0x1), application clocks (0x2) and sync boost (0x10) are not throttling.
  EXPECT_TRUE(throttle_reasons(0x1 | 0x2 | 0x10 | 0x100).empty());
  EXPECT_EQ(throttle_reasons(0x4 | 0x40), (std::vector<std::string>{"sw_power_cap", "hw_thermal"}));
  EXPECT_EQ(throttle_reasons(0x8 | 0x20 | 0x80),
            (std::vector<std::string>{"hw_power_brake", "sw_thermal", "hw_slowdown"}));
  setenv("FAKE_NVML_REASONS", "36", 1);  // 0x24: sw power cap and sw thermal
  std::string reason;
  const auto n = Nvml::open(&reason, D5_FAKE_NVML);
  ASSERT_NE(n, nullptr) << reason;
  const auto s = n->sample(kBus, &reason);
  ASSERT_TRUE(s) << reason;
  EXPECT_EQ(throttle_reasons(s->clock_event_reasons), (std::vector<std::string>{"sw_power_cap", "sw_thermal"}));
}

TEST_F(NvmlLoader, AnUnknownBusIsNamed) {
  std::string reason;
  const auto n = Nvml::open(&reason, D5_FAKE_NVML);
  ASSERT_NE(n, nullptr) << reason;
  EXPECT_FALSE(n->sample("0000:01:00.0", &reason));
  EXPECT_NE(reason.find("no GPU at PCI 0000:01:00.0"), std::string::npos) << reason;
  EXPECT_EQ(n->ecc_enabled("0000:01:00.0"), std::nullopt);
}

TEST_F(NvmlLoader, EveryWayOfBeingUnavailableSaysWhy) {
  std::string reason;
  EXPECT_EQ(Nvml::open(&reason, "/nonexistent/libnvidia-ml.so.1"), nullptr);
  EXPECT_NE(reason.find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << reason;

  EXPECT_EQ(Nvml::open(&reason, D5_FAKE_NVML_NO_ENERGY), nullptr);
  EXPECT_NE(reason.find("lacks nvmlDeviceGetTotalEnergyConsumption"), std::string::npos) << reason;

  setenv("FAKE_NVML_VERSION", "10.418.40", 1);
  EXPECT_EQ(Nvml::open(&reason, D5_FAKE_NVML), nullptr);
  EXPECT_NE(reason.find("version '10.418.40'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("older than 11"), std::string::npos) << reason;
  unsetenv("FAKE_NVML_VERSION");

  setenv("FAKE_NVML_INIT", "9", 1);
  EXPECT_EQ(Nvml::open(&reason, D5_FAKE_NVML), nullptr);
  EXPECT_NE(reason.find("nvmlInit failed: Driver Not Loaded"), std::string::npos) << reason;
}

TEST_F(NvmlLoader, TheEnvironmentNamesAnotherLibrary) {
  setenv("D5_NVML_LIBRARY", D5_FAKE_NVML, 1);
  std::string reason;
  const auto n = Nvml::open(&reason);
  unsetenv("D5_NVML_LIBRARY");
  ASSERT_NE(n, nullptr) << reason;
  EXPECT_EQ(n->driver_version(), "535.104.05");
}

}  // namespace
}  // namespace d5::cuda
