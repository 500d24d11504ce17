#include "deep500/train/bleu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "deep500/core/error.h"

namespace d5 {

namespace {

using NGramCounts = std::map<std::vector<BleuWord>, int64_t>;

NGramCounts ngrams(const BleuSentence& s, size_t n) {
  NGramCounts counts;
  for (size_t i = 0; i + n <= s.size(); ++i) ++counts[std::vector<BleuWord>(s.begin() + static_cast<std::ptrdiff_t>(i),
                                                                         s.begin() + static_cast<std::ptrdiff_t>(i + n))];
  return counts;
}

}  // namespace

void BleuCounts::add(const BleuSentence& hypothesis, const BleuSentence& reference) {
  hypothesis_length_ += static_cast<int64_t>(hypothesis.size());
  reference_length_ += static_cast<int64_t>(reference.size());
  for (int n = 1; n <= kOrder; ++n) {
    const NGramCounts reference_counts = ngrams(reference, static_cast<size_t>(n));
    for (const auto& [gram, count] : ngrams(hypothesis, static_cast<size_t>(n))) {
      auto in_reference = reference_counts.find(gram);
      if (in_reference != reference_counts.end()) matches_[n - 1] += std::min(count, in_reference->second);
      totals_[n - 1] += count;
    }
  }
}

double BleuCounts::precision(int n) const {
  D5_CHECK_ARG(n >= 1 && n <= kOrder, "BLEU precision of order {} is outside [1, {}]", n, kOrder);
  return totals_[n - 1] > 0 ? static_cast<double>(matches_[n - 1]) / static_cast<double>(totals_[n - 1])
                            : std::numeric_limits<double>::quiet_NaN();
}

double BleuCounts::score() const {
  if (hypothesis_length_ == 0) return 0;
  double log_sum = 0;
  for (int n = 0; n < kOrder; ++n) {
    if (matches_[n] == 0) return 0;  // also when there are no n-grams of this order at all
    log_sum += std::log(static_cast<double>(matches_[n]) / static_cast<double>(totals_[n]));
  }
  const double c = static_cast<double>(hypothesis_length_), r = static_cast<double>(reference_length_);
  const double brevity = c > r ? 1.0 : std::exp(1.0 - r / c);
  return 100.0 * brevity * std::exp(log_sum / kOrder);
}

BleuSentence group_words(const std::vector<int64_t>& pieces, const std::vector<bool>& word_starts) {
  BleuSentence words;
  for (int64_t p : pieces) {
    const bool starts = word_starts.empty() ||
                        (p >= 0 && static_cast<size_t>(p) < word_starts.size() && word_starts[static_cast<size_t>(p)]);
    if (words.empty() || starts) words.emplace_back();
    words.back().push_back(p);
  }
  return words;
}

}  // namespace d5
