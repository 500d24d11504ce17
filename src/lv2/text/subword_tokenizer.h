#pragma once
// Internal: the text datasets' tokenizer, SentencePiece (Kudo & Richardson, 2018; Debian's
// libsentencepiece-dev): a unigram subword model trained on a dataset's training split. Ids are
// dense in [0, vocabulary): 0 pads, 1 stands for a piece outside the vocabulary.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace d5::text {

// Whether this build has SentencePiece (its plugin, libd5_sentencepiece.so: sentencepiece_plugin.h
// says why a plugin); without it train and the constructor throw NotBuilt naming the package.
bool subword_tokenizer_built();

class SubwordTokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnknown = 1;

  // A unigram model of `vocabulary` pieces (fewer when the sentences cannot fill it) from
  // `sentences`, on one thread so the model is a function of the sentences alone. Returns the
  // serialized model (what the constructor loads; datasets cache it as a file). split_digits: every
  // digit a piece of its own, so numerals are read digit by digit.
  static std::string train(const std::vector<std::string>& sentences, int64_t vocabulary,
                           bool split_digits = false);

  // FormatError when `serialized_model` is not a SentencePiece model.
  explicit SubwordTokenizer(const std::string& serialized_model);
  ~SubwordTokenizer();
  SubwordTokenizer(const SubwordTokenizer&) = delete;
  SubwordTokenizer& operator=(const SubwordTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text) const;
  int64_t vocabulary() const;
  // Per id: whether the piece begins a word (SentencePiece's U+2581 prefix); false for the pad
  // and unknown ids. What per-word perplexity counts words by.
  std::vector<bool> word_starts() const;

 private:
  void* processor_ = nullptr;
};

}  // namespace d5::text
