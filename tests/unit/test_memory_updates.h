#pragma once
// Update kernels for the host-memory test device (test_memory_device.h): a FusedUpdates that runs
// the host's element loops on the records it is given, counting its calls, so that the paths a
// GPU's update kernels take (optimizers on device parameters, an executor's gradient sums on the
// device) run on machines without one. Only tests register it.
#include <memory>
#include <span>
#include <vector>

#include "deep500/spi/fused_update.h"
#include "test_memory_device.h"

namespace d5::test {

// Each tensor's sum of squares in double, in element order: the host's answer to
// FusedUpdates::squared_norms for memory host code may read.
inline std::vector<double> squared_norms_on_host(std::span<const float* const> tensors,
                                                 std::span<const int64_t> sizes) {
  std::vector<double> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    double s = 0;
    for (int64_t k = 0; k < sizes[i]; ++k) s += static_cast<double>(tensors[i][k]) * tensors[i][k];
    out.push_back(s);
  }
  return out;
}

class HostLoopsOnTestMemory final : public FusedUpdates {
 public:
  void apply(int32_t, std::span<const FusedUpdate> updates) override {
    ++applies;
    for (const FusedUpdate& u : updates) apply_update_on_host(u);
  }
  std::vector<double> squared_norms(int32_t, std::span<const float* const> tensors,
                                    std::span<const int64_t> sizes) override {
    ++norm_calls;
    return squared_norms_on_host(tensors, sizes);
  }
  int applies = 0, norm_calls = 0;
};

// Registered for "testmem" on first use.
inline std::shared_ptr<HostLoopsOnTestMemory> updates_on_test_memory() {
  static const auto updates = [] {
    auto u = std::make_shared<HostLoopsOnTestMemory>();
    register_fused_updates(test_memory_device().kind, u);
    return u;
  }();
  return updates;
}

}  // namespace d5::test
