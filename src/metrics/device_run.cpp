#include "deep500/metrics/device_run.h"

namespace d5 {

DeviceRun::DeviceRun(Device d, bool flush) : device_(d) {
  if (d.kind == DeviceKind::cpu) return;
  alloc_ = &allocator_for(d);
  timer_ = alloc_->make_timer(d.index);
  flush_ = flush && alloc_->flush_caches(d.index);
}

std::string DeviceRun::describe() const {
  if (!timer_) return "wall time, the device synchronised after each run";
  return flush_ ? "the call alone; the device's caches flushed before each run" : "the call alone; caches warm";
}

void DeviceRun::operator()(const std::function<void()>& call) {
  if (!alloc_) {
    call();
    return;
  }
  if (flush_) alloc_->flush_caches(device_.index);
  if (timer_) timer_->start();
  call();
  if (timer_) {
    timer_->stop();
    seconds = timer_->seconds();
  }
  alloc_->synchronize(device_.index);
}

}  // namespace d5
