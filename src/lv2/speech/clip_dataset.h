#pragma once
// Internal: a speech set in memory — each clip's features and its label (a class, or a padded
// sequence of classes) — served by fetch.
#include <cstdint>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"

namespace d5::speech {

class ClipDataset : public Dataset {
 public:
  // features: one sample's `shape` per clip, row after row; labels: `label_shape` per clip (empty
  // shape: one class each); label_of: the class samplers stratify by, one per clip.
  ClipDataset(std::string name, int64_t classes, std::vector<int64_t> shape, std::vector<float> features,
              std::vector<int64_t> label_shape, std::vector<int64_t> labels, std::vector<int64_t> label_of);

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(label_of_.size()); }
  std::map<std::string, TensorDesc> sample_descs() const override;
  int64_t classes() const override { return classes_; }
  int64_t label(int64_t index) const override { return label_of_[checked(index)]; }
  Batch fetch(std::span<const int64_t> indices) const override;

 private:
  size_t checked(int64_t index) const;

  std::string name_;
  int64_t classes_ = 0, per_sample_ = 1, per_label_ = 1;
  std::vector<int64_t> shape_, label_shape_;
  std::vector<float> features_;
  std::vector<int64_t> labels_, label_of_;
};

}  // namespace d5::speech
