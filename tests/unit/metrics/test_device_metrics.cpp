// Device metrics (metrics/device_metrics.h) against a device whose driver counters are scripted,
// so every figure has a hand-derived value: energy per run from a counter that steps, the
// refusal of a counter too coarse for the series, throttled runs, utilization and the
// allocator's high-water mark.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "deep500/metrics/device_metrics.h"
#include "deep500/metrics/timer.h"
#include "../test_memory_device.h"

namespace d5 {
namespace {

// Readings come from `script(i)` for the i-th read since the last reset.
class ScriptedSensors final : public DeviceSensors {
 public:
  std::function<DeviceSensorReading(int)> script;
  mutable int reads = 0;
  std::string source() const override { return "scripted"; }
  std::optional<DeviceSensorReading> read(std::string*) const override { return script(reads++); }
};

class SensedAllocator final : public test::TestMemoryAllocator {
 public:
  SensedAllocator() : TestMemoryAllocator("sensedmem") {}
  std::shared_ptr<ScriptedSensors> sensors_ = std::make_shared<ScriptedSensors>();
  std::shared_ptr<const DeviceSensors> sensors(int32_t, std::string*) const override { return sensors_; }
};

std::shared_ptr<SensedAllocator> sensed_allocator() {
  static auto a = [] {
    auto s = std::make_shared<SensedAllocator>();
    register_device_kind(s);
    return s;
  }();
  a->sensors_->reads = 0;
  return a;
}
Device sensed_device() {
  sensed_allocator();
  return Device{device_kind_named("sensedmem"), 0};
}

void run(Metric& m, int runs, const std::function<void()>& work = [] {}) {
  for (int i = 0; i < runs; ++i) {
    m.begin();
    work();
    m.end();
  }
}

TEST(DeviceEnergy, CounterAdvanceOverTheSeriesPerRun) {
  // Reads: one before the first run, one after each of 30 runs. The counter gains 1 J on every
  // second read: 15 steps, 15 J in all, 0.5 J per run; each end may be a step off: 2/15.
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.energy_joules = 1000.0 + std::floor(i / 2.0);
    return r;
  };
  DeviceEnergy e(sensed_device(), 0);
  run(e, 30);
  const MetricRecord r = e.result();
  ASSERT_TRUE(r.available) << r.unavailable_reason;
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(r.samples[0], 0.5);
  EXPECT_DOUBLE_EQ(r.info["series_joules"].get<double>(), 15.0);
  EXPECT_EQ(r.info["counter_steps"].get<int>(), 15);
  EXPECT_NEAR(r.info["relative_uncertainty"].get<double>(), 2.0 / 15, 1e-12);
  EXPECT_EQ(r.info["runs"].get<int>(), 30);
}

TEST(DeviceEnergy, ResetStartsANewSeries) {
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.energy_joules = 3.0 * i;  // 3 J a read
    return r;
  };
  DeviceEnergy e(sensed_device(), 0);
  run(e, 5);  // warm-up, thrown away
  e.reset();
  run(e, 12);  // reads 5 (begin) .. 17: 12 steps of 3 J
  const MetricRecord r = e.result();
  ASSERT_TRUE(r.available) << r.unavailable_reason;
  EXPECT_DOUBLE_EQ(r.samples[0], 3.0);
}

TEST(DeviceEnergy, ACounterTooCoarseForTheSeriesIsUnavailable) {
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.energy_joules = std::floor(i / 10.0);  // 3 steps in 31 reads
    return r;
  };
  DeviceEnergy e(sensed_device(), 0);
  run(e, 30);
  const MetricRecord r = e.result();
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(r.samples.empty());
  EXPECT_NE(r.unavailable_reason.find("advanced 3 times"), std::string::npos) << r.unavailable_reason;
  EXPECT_NE(r.unavailable_reason.find("--min-time"), std::string::npos) << r.unavailable_reason;
}

TEST(DeviceEnergy, NoCounterIsUnavailableNotZero) {
  auto a = sensed_allocator();
  a->sensors_->script = [](int) { return DeviceSensorReading{}; };
  DeviceEnergy e(sensed_device(), 0);
  run(e, 20);
  const MetricRecord r = e.result();
  EXPECT_FALSE(r.available);
  EXPECT_NE(r.unavailable_reason.find("no energy counter"), std::string::npos) << r.unavailable_reason;
}

// Runs far shorter than the interval are read rarely: the energy is shared among the runs up to
// the last read, and the clock has one sample per read, not per run. Runs of 0.05 ms against a
// 5 ms interval give about one read in 100 runs; a run the scheduler stretches past the interval
// (a loaded machine) adds one read each, still far below the bounds.
TEST(DeviceMetrics, ShortRunsAreReadOncePerInterval) {
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.energy_joules = 10.0 * i;
    r.sm_clock_mhz = 1000 + i;
    return r;
  };
  const Device d = sensed_device();
  DeviceEnergy e(d, 0.005);
  DeviceClock c(d, 0.005);
  const auto spin = [] {
    const int64_t t0 = wall_now_ns();
    while (wall_now_ns() - t0 < 50'000) {}  // 0.05 ms
  };
  const int runs = 4000;  // 0.2 s of runs: about 40 intervals
  for (int i = 0; i < runs; ++i) {
    e.begin();
    spin();
    e.end();
    c.end();
  }
  EXPECT_LT(a->sensors_->reads, runs / 4) << "read after almost every run";
  EXPECT_LT(c.samples().size(), static_cast<size_t>(runs / 8));
  const MetricRecord r = e.result();
  ASSERT_TRUE(r.available) << r.unavailable_reason;
  // The energy is that of the runs up to the last read (at most one interval, ~100 runs, before
  // the end), and every energy read found the counter moved (10 J a read).
  const int runs_read = r.info["runs"].get<int>();
  EXPECT_LE(runs_read, runs);
  EXPECT_GT(runs_read, runs - 200);
  EXPECT_NEAR(r.samples[0] * runs_read, r.info["series_joules"].get<double>(), 1e-9);
  EXPECT_GE(r.info["counter_steps"].get<int>(), DeviceEnergy::kMinCounterSteps);
}

TEST(DeviceMetrics, ADeviceWithoutSensorsSaysSo) {
  const Device d = test::test_memory_device();
  DeviceEnergy e(d);
  DeviceClock c(d);
  DeviceUtilization u(d);
  run(e, 3), run(c, 3), run(u, 3);
  for (const MetricRecord& r : {e.result(), c.result(), u.result()}) {
    EXPECT_FALSE(r.available) << r.name;
    EXPECT_NE(r.unavailable_reason.find("has no sensors"), std::string::npos) << r.unavailable_reason;
  }
}

TEST(DeviceClock, ThrottledRunsAreCountedAndNamed) {
  // End reads 0..5: runs 2 and 4 find power and heat holding the clocks back.
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.sm_clock_mhz = 1980 - 10 * i;
    r.memory_clock_mhz = 2619;
    if (i == 1) r.throttle_reasons = {"sw_power_cap"};
    if (i == 3) r.throttle_reasons = {"hw_thermal", "sw_power_cap"};
    return r;
  };
  DeviceClock c(sensed_device(), 0);
  run(c, 5);
  EXPECT_EQ(c.throttled_readings(), 2);
  EXPECT_EQ(c.throttle_note(), "2 of 5 readings throttled (hw_thermal, sw_power_cap)");
  const MetricRecord r = c.result();
  ASSERT_TRUE(r.available);
  EXPECT_EQ(r.samples, (std::vector<double>{1980, 1970, 1960, 1950, 1940}));
  EXPECT_EQ(r.info["throttled_readings"].get<int>(), 2);
  EXPECT_EQ(r.info["memory_clock_mhz"].get<double>(), 2619);
  c.reset();
  EXPECT_EQ(c.throttled_readings(), 0);
  EXPECT_EQ(c.throttle_note(), "");
}

TEST(DeviceUtilization, RecordsTheDriversShare) {
  auto a = sensed_allocator();
  a->sensors_->script = [](int i) {
    DeviceSensorReading r;
    r.utilization = 0.25 * (i + 1);
    return r;
  };
  DeviceUtilization u(sensed_device(), 0);
  run(u, 4);
  const MetricRecord r = u.result();
  ASSERT_TRUE(r.available);
  EXPECT_EQ(r.samples, (std::vector<double>{0.25, 0.5, 0.75, 1.0}));
}

TEST(DevicePeakMemory, HighWaterMarkOfEachRun) {
  const Device d = sensed_device();
  auto& alloc = allocator_for(d);
  const auto held = alloc.allocate(4096, 0);  // lives across the runs
  const double base = static_cast<double>(alloc.stats(0).allocated_bytes);
  DevicePeakMemory m(d);
  m.begin();
  { const auto scratch = alloc.allocate(size_t{3} << 20, 0); }  // freed before the run ends
  m.end();
  m.begin();
  m.end();
  ASSERT_EQ(m.samples().size(), 2u);
  EXPECT_EQ(m.samples()[0], base + (3 << 20));
  EXPECT_EQ(m.samples()[1], base);  // the cached block is not held, so not counted
}

}  // namespace
}  // namespace d5
