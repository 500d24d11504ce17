#pragma once
// Small pieces the trainer tests share: a learnable in-memory dataset, plain SGD as an
// UpdateRuleOptimizer, an in-order sampler, and a zoo MLP sized for them.
#include <cmath>
#include <numeric>

#include "deep500/train/dataset.h"
#include "deep500/net/model_zoo.h"
#include "deep500/train/optimizer.h"
#include "deep500/core/rng.h"
#include "deep500/train/sampler.h"

namespace d5::test {

inline constexpr int64_t kFeatures = 8;
inline constexpr int64_t kClasses = 3;

// Sample i belongs to class i % kClasses; its features are noise plus a class-dependent pattern,
// so a small network separates the classes within a few epochs.
class LearnableSet : public Dataset {
 public:
  LearnableSet(int64_t size, uint64_t seed) : size_(size), values_(static_cast<size_t>(size * kFeatures)) {
    RngStream rng(seed, "learnable");
    for (int64_t i = 0; i < size; ++i) {
      for (int64_t f = 0; f < kFeatures; ++f) {
        const double pattern = (f % kClasses == i % kClasses) ? 1.5 : -0.5;
        values_[static_cast<size_t>(i * kFeatures + f)] = static_cast<float>(pattern + 0.5 * rng.normal());
      }
    }
  }
  std::string name() const override { return "learnable"; }
  int64_t size() const override { return size_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{kFeatures}}}, {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }
  int64_t classes() const override { return kClasses; }
  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor x(DType::f32, Shape{n, kFeatures});
    Tensor y(DType::i64, Shape{n});
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = indices[static_cast<size_t>(r)];
      D5_CHECK_ARG(i >= 0 && i < size_, "index {} outside [0, {})", i, size_);
      for (int64_t f = 0; f < kFeatures; ++f) {
        x.data_as<float>()[r * kFeatures + f] = values_[static_cast<size_t>(i * kFeatures + f)];
      }
      y.data_as<int64_t>()[r] = i % kClasses;
    }
    return {{kDataInput, x}, {kDataLabels, y}};
  }

 private:
  int64_t size_;
  std::vector<float> values_;
};

// p <- p - lr * g.
class PlainSgd : public UpdateRuleOptimizer {
 public:
  explicit PlainSgd(double lr) : UpdateRuleOptimizer({{"lr", 0.1}}, {{"lr", lr}}) {}
  std::string name() const override { return "test-sgd"; }
  void update_rule(const Tensor& grad, Tensor& param, const std::string& /*name*/) override {
    const auto lr = static_cast<float>(learning_rate());
    const float* g = grad.data_as<float>();
    float* p = param.data_as<float>();
    for (int64_t i = 0; i < param.numel(); ++i) p[i] -= lr * g[i];
  }
};

class InOrderSampler : public Sampler {
 public:
  InOrderSampler(int64_t size, int64_t batch) : Sampler(size, batch, /*drop_last=*/true, 0) {}
  std::string name() const override { return "in-order"; }

 protected:
  std::vector<std::vector<int64_t>> plan_epoch(int64_t /*epoch*/) const override {
    std::vector<int64_t> order(static_cast<size_t>(dataset_size()));
    std::iota(order.begin(), order.end(), 0);
    return split_into_batches(order);
  }
};

inline Network learnable_mlp(int64_t batch) {
  ModelOptions o;
  o.batch = batch;
  o.classes = kClasses;
  o.input_shape = {kFeatures};
  o.with_loss = o.training = true;
  return build_model("mlp", o);
}

}  // namespace d5::test
