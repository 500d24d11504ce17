#pragma once
// SPI: the built-in update rules on a device (docs/optimizers.md#on-a-device).
//
// A device kind that can run them registers a FusedUpdates (the CUDA backend does, for cuda). The
// optimizers then update parameters whose tensors live on that device where they are, with their
// state buffers beside them: each update_rule describes its step as a FusedUpdate record, and a
// step's records go to the device together, so that the device runs them in as few launches as
// it can (a multi-tensor kernel), queued on its stream in order. Nothing is copied to the host.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "deep500/core/device.h"
#include "deep500/spi/fused_update_records.h"

namespace d5 {

class FusedUpdates {
 public:
  virtual ~FusedUpdates() = default;
  // Queues every update, in order, on device `index`'s stream; every pointer is that device's
  // memory. May return before the device has run them, as an operator's forward does.
  virtual void apply(int32_t index, std::span<const FusedUpdate> updates) = 0;
  // The sum of squares of each tensor, accumulated in double in an order fixed by the sizes alone
  // (the same sums every run); waits for the device.
  virtual std::vector<double> squared_norms(int32_t index, std::span<const float* const> tensors,
                                            std::span<const int64_t> sizes) = 0;
};

// Registering a kind again replaces its FusedUpdates (a plugin registered twice).
void register_fused_updates(DeviceKind kind, std::shared_ptr<FusedUpdates> updates);
// The kind's FusedUpdates, or null when it has none.
FusedUpdates* fused_updates_for(DeviceKind kind);

// One record with the host's element loops, as the optimizers run host tensors; for a device
// whose memory the host can address (the host-memory device of the tests). Defined by Level 2.
void apply_update_on_host(const FusedUpdate& update);

}  // namespace d5
