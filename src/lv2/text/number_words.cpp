// "number-words": a translation task between numerals and their English names ("4213" <-> "four
// thousand two hundred thirteen", number_names.h), as SentencePiece ids for a sequence-to-sequence
// model. Generated on the user's machine, deterministically:
//
// - the split is a function of the number alone: a number is in the test split when the FNV-1a
//   hash of its numeral ("4213"), mixed by splitmix64's finalizer and taken as a fraction of
//   2^64, is below test-fraction, so the splits hold disjoint numbers and a model is tested on
//   numbers it never saw. (Unmixed, FNV-1a would put all of 0-9 into one split, all of 10-99
//   into the other, and every hundred of longer numbers into one: tokenizer_cache.h);
// - a split's samples are drawn from the Philox stream "number-words/<split>" of spec.seed: a digit
//   count d uniform in [1, max-digits], then a value uniform among the d-digit numbers ([0, 10)
//   for d = 1), both drawn again while the value belongs to the other split; duplicates stay;
// - the tokenizer is a unigram SentencePiece model of `vocabulary` pieces trained on the numerals
//   and the names of the first 20,000 training-split numbers drawn with seed 0 (with the default
//   seed and samples, exactly the training split), so that numerals and words share one
//   vocabulary, and every seed and `samples` reads with the same ids: a model trained on one
//   draw can be tested on another. It is cached in the data directory as tokenizer-<key>.model
//   beside a manifest with its SHA-256 (tokenizer_cache.h); the key hashes the options it depends
//   on (vocabulary, max-digits, test-fraction);
// - with V the tokenizer's pieces (0 pads, 1 is unknown), id V starts a target (BOS) and V+1
//   ends it (EOS): `input` is the source's ids padded with 0, `decoder_input` BOS and the target's
//   ids padded with 0, `labels` the target's ids and EOS padded with -100 (kDefaultIgnoreIndex),
//   so decoder_input[t + 1] == labels[t] up to the end token (teacher forcing).
//
// The default lengths bound every number of up to 6 digits (not only those drawn) under the
// default tokenizer, measured over all 10^6 of them: a numeral takes at most 7 pieces, a name 9
// ("seven hundred seventy seven thousand seven hundred seventy seven": with 128 pieces every
// number word is one piece; with 64 the teens stay spelled in pieces and a name takes up to 23);
// each default adds 2 to that, and a target 1 more for its start or end token.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../data/dataset_options.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/train/quality.h"
#include "number_names.h"
#include "subword_tokenizer.h"
#include "text_datasets.h"
#include "tokenizer_cache.h"

namespace d5::text {

namespace {

constexpr const char* kGenerator = "number-words/1";
// The draws the tokenizer learns from (of the training split, seed 0): every number word occurs
// thousands of times in them.
constexpr int64_t kTokenizerSamples = 20'000;
// The most pieces of a numeral and of a name under the default options (see the top), plus 2.
constexpr int64_t kNumeralPieces = 7 + 2, kNamePieces = 9 + 2;
// A split missing from the numbers of up to max-digits digits (max-digits=1 and a test-fraction
// that puts none of 0-9 into the test split) would otherwise be drawn from forever.
constexpr int64_t kMaxDrawsPerSample = 1'000'000;

struct NumberOptions {
  bool to_words = true;
  int64_t samples = 0, max_digits = 6, vocabulary = 64, source_length = 0, target_length = 0;
  double test_fraction = 0.2;
};

// `count` numbers of one split, drawn as the top says.
std::vector<int64_t> draw_numbers(uint64_t seed, const std::string& split, int64_t count, const NumberOptions& o) {
  const bool test = split == "test";
  RngStream rng(seed, "number-words/" + split);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t draws = 0;; ++draws) {
      D5_CHECK_ARG(draws < kMaxDrawsPerSample,
                   "number-words: no number of at most {} digits falls into the {} split at test-fraction={} in {} "
                   "draws: raise max-digits or move test-fraction away from {}",
                   o.max_digits, split, o.test_fraction, kMaxDrawsPerSample, test ? 0 : 1);
      const auto digits = static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_digits))) + 1;
      int64_t low = 1;
      for (int64_t d = 1; d < digits; ++d) low *= 10;
      const int64_t n = digits == 1 ? static_cast<int64_t>(rng.below(10))
                                    : low + static_cast<int64_t>(rng.below(static_cast<uint64_t>(9 * low)));
      if (in_mixed_hash_test_split(std::to_string(n), o.test_fraction) == test) {
        out.push_back(n);
        break;
      }
    }
  }
  return out;
}

std::string number_tokenizer(const NumberOptions& o, const std::string& cache_dir) {
  TokenizerCacheEntry entry;
  entry.cache_dir = cache_dir;
  entry.vocabulary = o.vocabulary;
  entry.split_digits = true;
  entry.options = {{"generator", kGenerator},
                   {"max_digits", o.max_digits},
                   {"test_fraction", o.test_fraction},
                   {"tokenizer_samples", kTokenizerSamples}};
  return cached_tokenizer(std::move(entry), [&] {
    std::vector<std::string> sentences;
    for (int64_t n : draw_numbers(0, "train", kTokenizerSamples, o)) {
      sentences.push_back(std::to_string(n));
      sentences.push_back(number_to_words(n));
    }
    return sentences;
  });
}

NumberOptions parse_options(const DatasetSpec& spec) {
  data::DatasetOptions opts(spec, "number-words",
                            {"direction", "samples", "max-digits", "test-fraction", "vocabulary", "source-length",
                             "target-length"});
  D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "number-words: split must be 'train' or 'test', got '{}'",
               spec.split);
  NumberOptions o;
  const std::string direction = opts.get_string("direction", "to-words");
  D5_CHECK_ARG(direction == "to-words" || direction == "to-numerals",
               "number-words: direction must be 'to-words' or 'to-numerals', got '{}'", direction);
  o.to_words = direction == "to-words";
  o.samples = opts.get_int("samples", spec.split == "train" ? 20'000 : 1'000, 1, 10'000'000);
  o.max_digits = opts.get_int("max-digits", 6, 1, 9);
  o.vocabulary = opts.get_int("vocabulary", 128, 8, 1 << 16);
  o.test_fraction = opts.get_double("test-fraction", 0.2);
  D5_CHECK_ARG(o.test_fraction > 0 && o.test_fraction < 1, "number-words: test-fraction must lie in (0, 1), got {}",
               o.test_fraction);
  o.source_length = opts.get_int("source-length", o.to_words ? kNumeralPieces : kNamePieces, 1, 4096);
  o.target_length = opts.get_int("target-length", (o.to_words ? kNamePieces : kNumeralPieces) + 1, 2, 4096);
  opts.check_all_known();
  return o;
}

class NumberWordsDataset final : public Dataset {
 public:
  explicit NumberWordsDataset(const DatasetSpec& spec) {
    const NumberOptions o = parse_options(spec);
    // The tokenizer first: without SentencePiece, refuse before generating anything.
    D5_CHECK(subword_tokenizer_built(), NotBuilt,
             "number-words needs SentencePiece, which this d5 was built without: install libsentencepiece-dev "
             "(scripts/install-deps.sh) and rebuild");
    const SubwordTokenizer tokenizer(number_tokenizer(o, data::data_dir_for(spec)));
    source_length_ = o.source_length;
    target_length_ = o.target_length;
    pieces_ = tokenizer.vocabulary();
    word_starts_ = tokenizer.word_starts();
    word_starts_.insert(word_starts_.end(), {false, false});  // BOS, EOS
    const std::vector<int64_t> numbers = draw_numbers(spec.seed, spec.split, o.samples, o);
    const auto n = static_cast<size_t>(o.samples);
    input_.assign(n * static_cast<size_t>(source_length_), SubwordTokenizer::kPad);
    decoder_input_.assign(n * static_cast<size_t>(target_length_), SubwordTokenizer::kPad);
    labels_.assign(n * static_cast<size_t>(target_length_), kDefaultIgnoreIndex);
    Longest source, target;
    for (size_t i = 0; i < n; ++i) {
      const std::string numeral = std::to_string(numbers[i]), name = number_to_words(numbers[i]);
      const std::string& from = o.to_words ? numeral : name;
      const std::string& to = o.to_words ? name : numeral;
      const std::vector<int32_t> src = tokenizer.encode(from), tgt = tokenizer.encode(to);
      source.note(src.size(), from);
      target.note(tgt.size() + 1, to);  // with its BOS (decoder input) or EOS (labels)
      if (static_cast<int64_t>(src.size()) > source_length_ || static_cast<int64_t>(tgt.size()) >= target_length_)
        continue;  // refused below, naming the longest
      std::copy(src.begin(), src.end(), input_.begin() + static_cast<int64_t>(i) * source_length_);
      const auto dec = decoder_input_.begin() + static_cast<int64_t>(i) * target_length_;
      const auto lab = labels_.begin() + static_cast<int64_t>(i) * target_length_;
      *dec = start_token();
      std::copy(tgt.begin(), tgt.end(), dec + 1);
      std::copy(tgt.begin(), tgt.end(), lab);
      *(lab + static_cast<int64_t>(tgt.size())) = end_token();
      lengths_.push_back(static_cast<int64_t>(src.size()));
      strata_.push_back(static_cast<int64_t>(numeral.size()) - 1);
    }
    // One refusal naming every length to raise, each to what the longest sample needs.
    std::vector<std::string> short_of;
    if (source.pieces > source_length_)
      short_of.push_back(fmt::format("source-length={} is too short for '{}', {} pieces: raise source-length to at "
                                     "least {}",
                                     source_length_, source.text, source.pieces, source.pieces));
    if (target.pieces > target_length_)
      short_of.push_back(fmt::format("target-length={} is too short for '{}', {} pieces with its start or end "
                                     "token: raise target-length to at least {}",
                                     target_length_, target.text, target.pieces, target.pieces));
    D5_CHECK_ARG(short_of.empty(), "number-words: {}", fmt::join(short_of, "; "));
  }

  std::string name() const override { return "number-words"; }
  int64_t size() const override { return static_cast<int64_t>(strata_.size()); }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::i64, Shape{source_length_}}},
            {kDataDecoderInput, TensorDesc{DType::i64, Shape{target_length_}}},
            {kDataLabels, TensorDesc{DType::i64, Shape{target_length_}}}};
  }
  int64_t classes() const override { return pieces_ + 2; }
  int64_t vocabulary() const override { return pieces_ + 2; }
  int64_t end_token() const override { return pieces_ + 1; }
  std::vector<bool> word_starts() const override { return word_starts_; }
  // The digit count less one: a stratum for samplers, as the numbers' lengths are drawn uniformly.
  int64_t label(int64_t index) const override { return strata_[checked(index)]; }
  int64_t sample_length(int64_t index) const override { return lengths_[checked(index)]; }

  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor input = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n, source_length_}});
    Tensor decoder_input = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n, target_length_}});
    Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n, target_length_}});
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<int64_t>(checked(indices[static_cast<size_t>(i)]));
      std::copy_n(input_.begin() + k * source_length_, source_length_, input.data_as<int64_t>() + i * source_length_);
      std::copy_n(decoder_input_.begin() + k * target_length_, target_length_,
                  decoder_input.data_as<int64_t>() + i * target_length_);
      std::copy_n(labels_.begin() + k * target_length_, target_length_, labels.data_as<int64_t>() + i * target_length_);
    }
    return {{kDataInput, std::move(input)},
            {kDataDecoderInput, std::move(decoder_input)},
            {kDataLabels, std::move(labels)}};
  }

 private:
  // The longest text of one side, for the refusal that names it.
  struct Longest {
    int64_t pieces = 0;
    std::string text;
    void note(size_t n, const std::string& t) {
      if (static_cast<int64_t>(n) <= pieces) return;
      pieces = static_cast<int64_t>(n);
      text = t;
    }
  };

  int64_t start_token() const { return pieces_; }
  size_t checked(int64_t index) const {
    D5_CHECK_ARG(index >= 0 && index < size(), "number-words: sample {} is outside [0, {})", index, size());
    return static_cast<size_t>(index);
  }

  int64_t source_length_ = 0, target_length_ = 0, pieces_ = 0;
  std::vector<bool> word_starts_;
  std::vector<int64_t> input_, decoder_input_, labels_, lengths_, strata_;
};

}  // namespace

std::unique_ptr<Dataset> open_number_words(const DatasetSpec& spec) {
  return std::make_unique<NumberWordsDataset>(spec);
}

}  // namespace d5::text
