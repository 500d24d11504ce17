#pragma once
// The two timing loops a harness-overhead comparison puts side by side (docs/ops-overhead.md): a
// hand-written loop with nothing of deep500 in it, and deep500's runner doing the same number of
// runs, on the host's steady clock or on a device's own clock.
#include <functional>
#include <memory>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/metrics/device_run.h"
#include "deep500/metrics/runner.h"

namespace d5 {

// The hand-written loop: what a careful person times without a harness (steady_clock per call).
std::vector<double> hand_loop(const std::function<void()>& f, int runs);
// Exactly `runs` runs and no warm-up, so that d5's runner does the hand loop's work.
RunSettings fixed_runs(int runs);
// d5's runner (WallTime) with fixed_runs(runs): its samples.
std::vector<double> harness_runs(const std::function<void()>& f, int runs);

// A DeviceRun that times with the device's own clock (caches flushed before each call), as the
// operator benchmark times a device operator; InvalidArgument for a device without one.
std::unique_ptr<DeviceRun> device_clock(Device d);
// The hand loop on a device: `f` only queues its work; each run is the device's time for it.
std::vector<double> hand_device_loop(const std::function<void()>& f, int runs, DeviceRun& timed);
// d5's runner around the same device-timed call, the DeviceTime metric first as the operator
// benchmark has it; its samples are the device's times.
std::vector<double> harness_device_runs(const std::function<void()>& f, int runs, DeviceRun& timed);

}  // namespace d5
