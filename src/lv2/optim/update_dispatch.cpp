// Where an update runs: the host's element loops for host tensors, the device's FusedUpdates
// (spi/fused_update.h) for tensors on a device, so that the rules' arithmetic has one
// description per rule (its FusedUpdate record) whichever runs it.
#include <algorithm>

#include "optim_internal.h"

namespace d5 {

void apply_update_on_host(const FusedUpdate& u) {
  using namespace optim;
  switch (u.kind) {
    case UpdateKind::sgd:
      for_chunks(u.n, [u](int64_t b, int64_t e) { sgd_kernel(b, e, u.g, u.p, u.state[0], u.scalars.sgd); });
      return;
    case UpdateKind::adam:
      for_chunks(u.n, [u](int64_t b, int64_t e) {
        adam_kernel(b, e, u.g, u.p, u.state[0], u.state[1], u.state[2], u.scalars.adam);
      });
      return;
    case UpdateKind::adagrad:
      for_chunks(u.n, [u](int64_t b, int64_t e) { adagrad_kernel(b, e, u.g, u.p, u.state[0], u.scalars.adagrad); });
      return;
    case UpdateKind::rmsprop:
      for_chunks(u.n, [u](int64_t b, int64_t e) {
        rmsprop_kernel(b, e, u.g, u.p, u.state[0], u.state[1], u.state[2], u.scalars.rmsprop);
      });
      return;
    case UpdateKind::accelegrad_interpolate:
      for_chunks(u.n, [u](int64_t b, int64_t e) {
        accelegrad_interpolate_kernel(b, e, u.p, u.state[0], u.scalars.accelegrad);
      });
      return;
    case UpdateKind::accelegrad_step:
      for_chunks(u.n, [u](int64_t b, int64_t e) {
        accelegrad_step_kernel(b, e, u.g, u.p, u.state[0], u.scalars.accelegrad);
      });
      return;
    case UpdateKind::accumulate:
      for_chunks(u.n, [u](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) u.p[i] = u.p[i] + u.g[i];
      });
      return;
    case UpdateKind::copy_param:
      for_chunks(u.n, [u](int64_t b, int64_t e) { std::copy(u.p + b, u.p + e, u.state[0] + b); });
      return;
  }
  throw InternalError(fmt::format("apply_update_on_host: unknown update kind {}", static_cast<int>(u.kind)));
}

namespace optim {

void run_update(Device device, const FusedUpdate& update) {
  if (device.kind == DeviceKind::cpu) {
    apply_update_on_host(update);
    return;
  }
  if (DeferredChunks* deferred = DeferredChunks::current()) {
    deferred->add(device, update);
    return;
  }
  FusedUpdates* fused = fused_updates_for(device.kind);
  D5_CHECK_ARG(fused != nullptr, "no update kernels are registered for {}", device.to_string());
  if (update.n > 0) fused->apply(device.index, {&update, 1});
}

std::vector<double> squared_norms(const std::vector<const Tensor*>& tensors) {
  std::vector<double> norms(tensors.size(), 0.0);
  std::vector<bool> done(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (done[i]) continue;
    const Device device = tensors[i]->device();
    if (device.kind == DeviceKind::cpu) {
      const float* g = tensors[i]->data_as<float>();
      const int64_t n = tensors[i]->numel();
      double norm2 = 0;
#pragma omp parallel for reduction(+ : norm2) schedule(static) if (n > 4 * kChunk)
      for (int64_t k = 0; k < n; ++k) norm2 += static_cast<double>(g[k]) * g[k];
      norms[i] = norm2;
      done[i] = true;
      continue;
    }
    // Every tensor on this device in one call.
    std::vector<size_t> which;
    std::vector<const float*> data;
    std::vector<int64_t> sizes;
    for (size_t j = i; j < tensors.size(); ++j) {
      if (done[j] || !(tensors[j]->device() == device)) continue;
      which.push_back(j);
      data.push_back(static_cast<const float*>(tensors[j]->data()));
      sizes.push_back(tensors[j]->numel());
      done[j] = true;
    }
    FusedUpdates* fused = fused_updates_for(device.kind);
    D5_CHECK_ARG(fused != nullptr, "no update kernels are registered for {}", device.to_string());
    const std::vector<double> on_device = fused->squared_norms(device.index, data, sizes);
    for (size_t k = 0; k < which.size(); ++k) norms[which[k]] = on_device.at(k);
  }
  return norms;
}

}  // namespace optim
}  // namespace d5
