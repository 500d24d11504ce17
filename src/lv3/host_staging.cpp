// Host staging of device tensors for communicators that take host memory
// (include/deep500/dist/host_staging.h).
#include "deep500/dist/host_staging.h"

#include <chrono>
#include <cstring>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void copy_to_host_memory(const Tensor& t, std::byte* host, CommunicationVolume* volume) {
  D5_CHECK(t.defined(), InvalidArgument, "cannot communicate an undefined tensor");
  if (t.on_host()) {
    std::memcpy(host, t.data(), t.bytes());
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  // Tensor::copy_from waits for the device, so the bytes are there when it returns.
  Tensor::view(t.desc(), host).copy_from(t);
  if (volume != nullptr) volume->record_staging_to_host(static_cast<int64_t>(t.bytes()), seconds_since(t0));
}

void copy_from_host_memory(const std::byte* host, Tensor& t, CommunicationVolume* volume) {
  D5_CHECK(t.defined(), InvalidArgument, "cannot communicate into an undefined tensor");
  if (t.on_host()) {
    std::memcpy(t.data(), host, t.bytes());
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  t.copy_from(Tensor::view(t.desc(), const_cast<std::byte*>(host)));
  if (volume != nullptr) volume->record_staging_from_host(static_cast<int64_t>(t.bytes()), seconds_since(t0));
}

Tensor staged_to_host(const Tensor& t, CommunicationVolume* volume) {
  Tensor host = Tensor::uninitialized(t.desc());
  copy_to_host_memory(t, static_cast<std::byte*>(host.data()), volume);
  return host;
}

void staged_from_host(const Tensor& host, Tensor& t, CommunicationVolume* volume) {
  D5_CHECK(host.on_host() && host.bytes() == t.bytes(), Internal, "staging: a host copy of {} bytes for {} bytes",
           host.bytes(), t.bytes());
  copy_from_host_memory(static_cast<const std::byte*>(host.data()), t, volume);
}

}  // namespace d5
