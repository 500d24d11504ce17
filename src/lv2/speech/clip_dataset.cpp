// A speech set in memory (clip_dataset.h).
#include "clip_dataset.h"

#include <algorithm>

#include "deep500/core/error.h"

namespace d5::speech {

ClipDataset::ClipDataset(std::string name, int64_t classes, std::vector<int64_t> shape, std::vector<float> features,
                         std::vector<int64_t> label_shape, std::vector<int64_t> labels, std::vector<int64_t> label_of)
    : name_(std::move(name)),
      classes_(classes),
      shape_(std::move(shape)),
      label_shape_(std::move(label_shape)),
      features_(std::move(features)),
      labels_(std::move(labels)),
      label_of_(std::move(label_of)) {
  for (int64_t d : shape_) per_sample_ *= d;
  for (int64_t d : label_shape_) per_label_ *= d;
  D5_CHECK(features_.size() == label_of_.size() * static_cast<size_t>(per_sample_) &&
               labels_.size() == label_of_.size() * static_cast<size_t>(per_label_),
           Internal, "{}: {} clips with {} feature values and {} labels", name_, label_of_.size(), features_.size(),
           labels_.size());
}

std::map<std::string, TensorDesc> ClipDataset::sample_descs() const {
  return {{kDataInput, TensorDesc{DType::f32, Shape(shape_)}},
          {kDataLabels, TensorDesc{DType::i64, Shape(label_shape_)}}};
}

Batch ClipDataset::fetch(std::span<const int64_t> indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  std::vector<int64_t> dims = {n}, label_dims = {n};
  dims.insert(dims.end(), shape_.begin(), shape_.end());
  label_dims.insert(label_dims.end(), label_shape_.begin(), label_shape_.end());
  Tensor input = Tensor::uninitialized(TensorDesc{DType::f32, Shape(dims)});
  Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, Shape(label_dims)});
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<int64_t>(checked(indices[static_cast<size_t>(i)]));
    std::copy_n(features_.begin() + k * per_sample_, per_sample_, input.data_as<float>() + i * per_sample_);
    std::copy_n(labels_.begin() + k * per_label_, per_label_, labels.data_as<int64_t>() + i * per_label_);
  }
  return {{kDataInput, std::move(input)}, {kDataLabels, std::move(labels)}};
}

size_t ClipDataset::checked(int64_t index) const {
  D5_CHECK_ARG(index >= 0 && index < size(), "{}: sample {} is outside [0, {})", name_, index, size());
  return static_cast<size_t>(index);
}

}  // namespace d5::speech
