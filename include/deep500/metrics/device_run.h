#pragma once
// How one timed run of work on a device is bracketed, for every benchmark that times device work
// (d5 ops bench, d5_bench_op_overhead): the device's caches flushed first unless asked not to (a
// warm cache is not what a layer of a real network sees), the device's own timer (CUDA events on
// its stream) around the call alone, which leaves out the host's launch and wait, and the run
// over when the device is done, so no run overlaps the next. On the host: the call, as is.
#include <functional>
#include <memory>
#include <string>

#include "deep500/core/device.h"
#include "deep500/core/device_allocator.h"

namespace d5 {

class DeviceRun {
 public:
  DeviceRun(Device d, bool flush);
  // Whether the device has a clock of its own (then `seconds` holds each run's time on it).
  bool timed() const { return timer_ != nullptr; }
  // What a run's time brackets, for the result's records.
  std::string describe() const;
  void operator()(const std::function<void()>& call);
  double seconds = 0;  // of the last run, on the device's clock

 private:
  Device device_;
  DeviceAllocator* alloc_ = nullptr;
  std::unique_ptr<DeviceTimer> timer_;
  bool flush_ = false;
};

}  // namespace d5
