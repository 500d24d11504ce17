#pragma once
// Level 2: BLEU (Papineni et al., 2002), the translation quality measure (docs/quality.md#bleu).
//
// Corpus BLEU-4 with one reference per hypothesis, as sacreBLEU scores tokenized text without
// smoothing: for n = 1..4, p_n is the n-grams of every hypothesis that also occur in its
// reference (each clipped to the reference's count of it) over all hypothesis n-grams; with c the
// hypotheses' summed length and r the references', the brevity penalty is 1 when c > r and
// exp(1 - r/c) otherwise; BLEU = 100 * BP * exp(mean of log p_n), and 0 when any p_n is 0.
//
// Tokens are words, each a sequence of ids (word pieces): a translation model's pieces are
// grouped into words before scoring, so BLEU does not depend on how a tokenizer cut the words.
#include <array>
#include <cstdint>
#include <vector>

namespace d5 {

using BleuWord = std::vector<int64_t>;
using BleuSentence = std::vector<BleuWord>;

class BleuCounts {
 public:
  static constexpr int kOrder = 4;
  void add(const BleuSentence& hypothesis, const BleuSentence& reference);
  // 0 when nothing was added.
  double score() const;
  int64_t hypothesis_length() const { return hypothesis_length_; }
  int64_t reference_length() const { return reference_length_; }
  // p_n for n = 1..4 (index n-1): clipped matches over hypothesis n-grams; NaN when none.
  double precision(int n) const;

 private:
  std::array<int64_t, kOrder> matches_{}, totals_{};
  int64_t hypothesis_length_ = 0, reference_length_ = 0;
};

// Pieces grouped into words: a word begins at the first piece and at every piece whose
// word_starts entry is true; with word_starts empty every piece is a word.
BleuSentence group_words(const std::vector<int64_t>& pieces, const std::vector<bool>& word_starts);

}  // namespace d5
