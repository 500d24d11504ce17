#include <fmt/format.h>

#include "deep500/train/dataset_subset.h"
#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

IndexRange parse_index_range(const std::string& text, int64_t size) {
  const size_t colon = text.find(':');
  auto bound = [&](std::string_view s, int64_t fallback) {
    if (s.empty()) return fallback;
    const int64_t v = parse_int(s).value_or(-1);
    D5_CHECK_ARG(v >= 0,
                 "range='{}': '{}' is not a sample index; write BEGIN:END, e.g. range=0:8000", text, s);
    return v;
  };
  D5_CHECK_ARG(colon != std::string::npos, "range='{}' has no ':'; write BEGIN:END, e.g. range=0:8000", text);
  const std::string_view all(text);
  const IndexRange r{bound(all.substr(0, colon), 0), bound(all.substr(colon + 1), size)};
  D5_CHECK_ARG(r.begin < r.end && r.end <= size, "range={} selects [{}, {}), which is not a non-empty part of the {} samples",
               text, r.begin, r.end, size);
  return r;
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, IndexRange range)
    : base_(std::move(base)), range_(range) {
  D5_CHECK_ARG(range_.begin >= 0 && range_.begin <= range_.end && range_.end <= base_->size(),
               "subset [{}, {}) of '{}' is outside its {} samples", range_.begin, range_.end, base_->name(),
               base_->size());
}

std::string SubsetDataset::name() const {
  return fmt::format("{}[{}:{}]", base_->name(), range_.begin, range_.end);
}

int64_t SubsetDataset::base_index(int64_t index) const {
  D5_CHECK_ARG(index >= 0 && index < size(), "{}: sample index {} is outside [0, {})", name(), index, size());
  return range_.begin + index;
}

Batch SubsetDataset::fetch(std::span<const int64_t> indices) const {
  std::vector<int64_t> mapped(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) mapped[i] = base_index(indices[i]);
  return base_->fetch(mapped);
}

int64_t SubsetDataset::label(int64_t index) const { return base_->label(base_index(index)); }
int64_t SubsetDataset::sample_length(int64_t index) const { return base_->sample_length(base_index(index)); }

}  // namespace d5
