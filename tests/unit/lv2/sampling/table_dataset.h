#pragma once
// A small in-memory Dataset for sampler, loader and metric tests: fixed labels and lengths, an
// "input" row per sample holding its index (so a batch says which samples it holds), an optional
// index whose fetch throws, and an optional delay per fetch.
#include <chrono>
#include <thread>
#include <vector>

#include "deep500/train/dataset.h"
#include "deep500/core/error.h"

namespace d5::testing {

class TableDataset : public Dataset {
 public:
  explicit TableDataset(std::vector<int64_t> labels, int64_t classes, std::vector<int64_t> lengths = {})
      : labels_(std::move(labels)), classes_(classes), lengths_(std::move(lengths)) {}
  // Labels i % classes, lengths 0.
  static TableDataset cyclic(int64_t n, int64_t classes) {
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = i % classes;
    return TableDataset(std::move(labels), classes);
  }

  std::string name() const override { return "table"; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{2}}}, {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }
  int64_t classes() const override { return classes_; }
  int64_t label(int64_t index) const override { return labels_.at(static_cast<size_t>(index)); }
  int64_t sample_length(int64_t index) const override {
    return lengths_.empty() ? 0 : lengths_.at(static_cast<size_t>(index));
  }
  Batch fetch(std::span<const int64_t> indices) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    const auto n = static_cast<int64_t>(indices.size());
    Tensor input(DType::f32, Shape{n, 2});
    Tensor labels(DType::i64, Shape{n});
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = indices[static_cast<size_t>(i)];
      D5_CHECK_ARG(index >= 0 && index < size(), "table dataset: index {} outside [0, {})", index, size());
      D5_CHECK(index != failing_index_, FormatError, "table dataset: sample {} is corrupt (test)", index);
      input.at<float>({i, 0}) = static_cast<float>(index);
      input.at<float>({i, 1}) = static_cast<float>(labels_[static_cast<size_t>(index)]);
      labels.at<int64_t>({i}) = labels_[static_cast<size_t>(index)];
    }
    return {{kDataInput, input}, {kDataLabels, labels}};
  }

  void set_failing_index(int64_t index) { failing_index_ = index; }
  void set_delay(std::chrono::microseconds delay) { delay_ = delay; }

 private:
  std::vector<int64_t> labels_;
  int64_t classes_;
  std::vector<int64_t> lengths_;
  int64_t failing_index_ = -1;
  std::chrono::microseconds delay_{0};
};

}  // namespace d5::testing
