#pragma once
// GPU tests skip, with the reason, where no CUDA device can be used (ctest lists them as
// skipped); the tests that run there check the refusals instead.
#include <gtest/gtest.h>

#include <string>

#include "deep500/backends/builtin.h"
#include "deep500/core/device.h"
#include "deep500/core/rng.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/model_zoo.h"
#include "deep500/net/tensor_names.h"

namespace d5::test {

// Empty when a CUDA device is usable, else why not.
inline std::string no_gpu_reason() {
  register_builtin_backends();
  std::string reason;
  if (!gpu_info(&reason).empty()) return "";
  return reason.empty() ? "no CUDA device" : reason;
}

// LeNet-5 at batch 16 with its loss, in training mode, and a batch of uniform images with labels
// drawn from the stream (seed, tag).
inline Network lenet_training_network() {
  ModelOptions o;
  o.batch = 16;
  o.with_loss = true;
  o.training = true;
  return build_model("lenet5", o);
}
inline TensorMap lenet_feeds(const Network& net, uint64_t seed, const std::string& tag) {
  Tensor x(net.desc(kZooInput));
  RngStream rng(seed, tag);
  for (float& v : x.span<float>()) v = rng.uniform_float();
  Tensor y(net.desc(kZooLabels));
  for (int64_t i = 0; i < y.numel(); ++i) y.data_as<int64_t>()[i] = static_cast<int64_t>(rng.below(10));
  return {{kZooInput, x}, {kZooLabels, y}};
}

}  // namespace d5::test

#define D5_REQUIRE_GPU()                                                    \
  do {                                                                      \
    const std::string why = ::d5::test::no_gpu_reason();                    \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;            \
  } while (0)
