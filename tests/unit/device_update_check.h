#pragma once
// Every built-in update rule run on parameters that live on a device and, beside it, on the host
// with the same seeded parameters and gradients: the oracle for a device's FusedUpdates (the
// host's element loops, themselves checked by hand-derived values in test_update_rules.cpp).
// Used with the host-memory test device (d5_test_lv2_optim) and with cuda:0 (d5_test_cuda).
#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deep500/core/rng.h"
#include "deep500/core/tensor.h"
#include "deep500/train/optimizer.h"

namespace d5::test {

struct DeviceUpdateCase {
  std::string label, optimizer;
  Hyperparameters hyper;
};
inline void PrintTo(const DeviceUpdateCase& c, std::ostream* os) { *os << c.label; }

// Each rule and each branch of its loop (weight decay, dampening, amsgrad, centered, momentum).
inline const std::vector<DeviceUpdateCase>& device_update_cases() {
  static const std::vector<DeviceUpdateCase> cases = {
      {"sgd", "sgd", {{"lr", 0.1}}},
      {"sgd_wd", "sgd", {{"lr", 0.1}, {"weight_decay", 0.01}}},
      {"momentum", "momentum", {{"lr", 0.05}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.01}}},
      {"nesterov", "nesterov", {{"lr", 0.05}, {"momentum", 0.9}}},
      {"adam", "adam", {{"lr", 0.01}, {"weight_decay", 0.01}}},
      {"adam_amsgrad", "adam", {{"lr", 0.01}, {"amsgrad", 1}}},
      {"adamw", "adamw", {{"lr", 0.01}, {"weight_decay", 0.1}}},
      {"adagrad", "adagrad", {{"lr", 0.1}, {"lr_decay", 0.1}, {"weight_decay", 0.01}, {"initial_accumulator_value", 0.1}}},
      {"rmsprop", "rmsprop", {{"lr", 0.01}}},
      {"rmsprop_centered_momentum", "rmsprop", {{"lr", 0.01}, {"momentum", 0.5}, {"centered", 1}, {"weight_decay", 0.01}}},
      {"accelegrad", "accelegrad", {{"lr", 0.5}, {"diameter", 2}, {"gradient_bound", 1}}},
  };
  return cases;
}

// Sizes that cover one element, a partial block, several blocks and a partial last block of a
// multi-block tensor, and more tensors than one launch takes (30 > 24).
inline std::vector<int64_t> device_update_sizes() {
  std::vector<int64_t> sizes = {1, 3, 1000, 4096, 4097, 70001};
  for (int64_t i = 0; i < 24; ++i) sizes.push_back(17 + 31 * i);
  return sizes;
}

inline Tensor seeded_tensor(int64_t n, const std::string& name) {
  RngStream rng(2024, name);
  Tensor t(TensorDesc{DType::f32, Shape{n}, Layout::any});
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal());
  return t;
}

// Parameters (and their gradients, one set per step, all placed before the first step) of one
// optimizer on one device.
struct UpdateRun {
  std::unique_ptr<Optimizer> optimizer;
  std::vector<Tensor> params;
  std::vector<std::vector<Tensor>> grads;  // [step][param]
  Device device;

  UpdateRun(const DeviceUpdateCase& c, Device d, int steps) : optimizer(make_optimizer(c.optimizer, c.hyper)), device(d) {
    const std::vector<int64_t> sizes = device_update_sizes();
    for (size_t i = 0; i < sizes.size(); ++i) params.push_back(seeded_tensor(sizes[i], "p" + std::to_string(i)).to(d));
    for (int s = 0; s < steps; ++s) {
      grads.emplace_back();
      for (size_t i = 0; i < sizes.size(); ++i)
        grads.back().push_back(
            seeded_tensor(sizes[i], "g" + std::to_string(s) + "/" + std::to_string(i)).to(d));
    }
  }
  ThreeStepOptimizer& three_step() { return dynamic_cast<ThreeStepOptimizer&>(*optimizer); }
  // One step as ThreeStepOptimizer::step takes it, with step s's gradients.
  void step(int s) {
    ThreeStepOptimizer& o = three_step();
    o.new_input();
    std::vector<std::pair<std::string, Tensor>> named;
    for (size_t i = 0; i < params.size(); ++i) named.emplace_back("p" + std::to_string(i), params[i]);
    o.prepare_all(named);
    std::vector<ThreeStepOptimizer::ParameterUpdate> updates;
    for (size_t i = 0; i < params.size(); ++i)
      updates.push_back({grads[static_cast<size_t>(s)][i], params[i], "p" + std::to_string(i)});
    o.update_all(updates);
    o.end_step();
  }
};

// The largest |device - host| over a tensor, relative to the host tensor's largest magnitude.
inline double linf_relative(const Tensor& device_value, const Tensor& host_value) {
  const Tensor d = device_value.to(Device::cpu());
  const float* a = d.data_as<float>();
  const float* b = host_value.data_as<float>();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < host_value.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

struct UpdateComparison {
  double worst_param = 0, worst_state = 0;
  int64_t elements = 0, bitwise_equal = 0;
};

// Parameters and every state buffer of the two runs.
inline UpdateComparison compare_runs(UpdateRun& on_device, UpdateRun& on_host) {
  UpdateComparison c;
  for (size_t i = 0; i < on_host.params.size(); ++i) {
    c.worst_param = std::max(c.worst_param, linf_relative(on_device.params[i], on_host.params[i]));
    const Tensor d = on_device.params[i].to(Device::cpu());
    for (int64_t k = 0; k < d.numel(); ++k, ++c.elements)
      if (d.data_as<float>()[k] == on_host.params[i].data_as<float>()[k]) ++c.bitwise_equal;
  }
  const OptimizerState sd = on_device.optimizer->state(), sh = on_host.optimizer->state();
  EXPECT_EQ(sd.size(), sh.size());
  for (const auto& [key, h] : sh) {
    auto it = sd.find(key);
    if (it == sd.end()) {
      ADD_FAILURE() << "the device run's state lacks " << key;
      continue;
    }
    EXPECT_TRUE(it->second.device() == Device::cpu()) << key << " is saved on " << it->second.device().to_string();
    if (h.dtype() == DType::f32)
      c.worst_state = std::max(c.worst_state, linf_relative(it->second, h));
    else  // step counts and AcceleGrad's sums of squared norms, added in another order on a device
      EXPECT_NEAR(it->second.get(0), h.get(0), 1e-12 * std::max(1.0, std::abs(h.get(0)))) << key;
  }
  return c;
}

}  // namespace d5::test
