#pragma once
// Measured peaks of accelerators, in the host's PeakMeasurement form (peak.h): a backend that
// owns a device kind registers how to measure it (the CUDA backend: an FMA kernel, a device copy
// and cuBLAS's bf16 tensor-core product), and `d5 peak` and `d5 ops bench` ask for the figures of
// the device an operator runs on, measured once per process.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/core/dtype.h"
#include "deep500/metrics/peak.h"

namespace d5 {

struct DevicePeak {
  Device device;
  std::string name;                            // the device's product name
  std::vector<PeakMeasurement> measurements;   // e.g. fma_f32, tensor_bf16, copy
  // The measurement named `name`, or nullptr.
  const PeakMeasurement* find(std::string_view name) const;
  // The best f32 FMA run (GFLOP/s): what an f32 operator's throughput is a fraction of, as for
  // the host (peak_gflops); 0 when not measured.
  double fma_f32_gflops() const;
  // The peak an operator computing in `t` is a fraction of: the FMA rate for f32 (and wider),
  // the measured bf16 tensor-core product for f16 and bf16 (the same rate on the GPUs d5 knows;
  // f16 has no measurement of its own). 0 when not measured.
  double gflops_for(DType t) const;
};

using DevicePeakMeasurer = std::function<DevicePeak(int32_t index, const PeakSettings& settings)>;

// Registered by a backend for its device kind; replaces an earlier one.
void register_device_peak_measurer(DeviceKind kind, DevicePeakMeasurer measurer);
bool has_device_peak_measurer(DeviceKind kind);
// Measured on first use and cached for the process; Unimplemented when no backend measures this
// kind of device.
const DevicePeak& device_peak(Device device);

nlohmann::json to_json(const DevicePeak& p);

}  // namespace d5
