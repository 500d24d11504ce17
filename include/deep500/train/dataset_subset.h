#pragma once
// A contiguous range of another dataset, for the generic option range=BEGIN:END that every format
// accepts (open_dataset applies it): index i of the subset is index BEGIN + i of the base.
#include <memory>

#include "deep500/train/dataset.h"

namespace d5 {

struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
};

// "B:E", ":E" (from 0) or "B:" (to `size`) -> [B, E). InvalidArgument unless 0 <= B < E <= size.
IndexRange parse_index_range(const std::string& text, int64_t size);

class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, IndexRange range);
  std::string name() const override;
  int64_t size() const override { return range_.end - range_.begin; }
  std::map<std::string, TensorDesc> sample_descs() const override { return base_->sample_descs(); }
  int64_t classes() const override { return base_->classes(); }
  int64_t vocabulary() const override { return base_->vocabulary(); }
  std::vector<bool> word_starts() const override { return base_->word_starts(); }
  int64_t end_token() const override { return base_->end_token(); }
  Batch fetch(std::span<const int64_t> indices) const override;
  int64_t label(int64_t index) const override;
  int64_t sample_length(int64_t index) const override;

 private:
  int64_t base_index(int64_t index) const;

  std::shared_ptr<const Dataset> base_;
  IndexRange range_;
};

}  // namespace d5
