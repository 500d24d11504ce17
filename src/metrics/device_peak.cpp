#include "deep500/metrics/device_peak.h"

#include <map>
#include <mutex>

#include "deep500/core/error.h"

namespace d5 {

namespace {
struct State {
  std::mutex mutex;
  std::map<DeviceKind, DevicePeakMeasurer> measurers;
  std::map<std::pair<DeviceKind, int32_t>, DevicePeak> measured;
};
State& state() {
  static State s;
  return s;
}
}  // namespace

const PeakMeasurement* DevicePeak::find(std::string_view n) const {
  for (const auto& m : measurements)
    if (m.name == n) return &m;
  return nullptr;
}

double DevicePeak::fma_f32_gflops() const {
  const PeakMeasurement* m = find("fma_f32");
  return m ? m->summary.max : 0;
}

double DevicePeak::gflops_for(DType t) const {
  if (t != DType::f16 && t != DType::bf16) return fma_f32_gflops();
  const PeakMeasurement* m = find("tensor_bf16");
  return m ? m->summary.max : 0;
}

void register_device_peak_measurer(DeviceKind kind, DevicePeakMeasurer measurer) {
  std::lock_guard lock(state().mutex);
  state().measurers[kind] = std::move(measurer);
}

bool has_device_peak_measurer(DeviceKind kind) {
  std::lock_guard lock(state().mutex);
  return state().measurers.count(kind) > 0;
}

const DevicePeak& device_peak(Device device) {
  State& s = state();
  // Held while measuring: two callers must not run their kernels on the device at once.
  std::lock_guard lock(s.mutex);
  const auto key = std::make_pair(device.kind, device.index);
  if (auto it = s.measured.find(key); it != s.measured.end()) return it->second;
  const auto m = s.measurers.find(device.kind);
  D5_CHECK(m != s.measurers.end(), Unimplemented, "no backend of this build measures the peak of {}",
           device.to_string());
  DevicePeak p = m->second(device.index, PeakSettings{});
  p.device = device;
  return s.measured.emplace(key, std::move(p)).first->second;
}

nlohmann::json to_json(const DevicePeak& p) {
  nlohmann::json j = {{"device", p.device.to_string()}, {"name", p.name}};
  for (const auto& m : p.measurements) j[m.name] = to_json(m);
  return j;
}

}  // namespace d5
