// "wordnet-glosses": WordNet 3.0's definitions (Debian's wordnet-base), each labelled with the
// lexicographer file its synset was filed in (45 classes: noun.animal, verb.motion, adj.all, ...),
// as SentencePiece token ids. Generated on the user's machine, deterministically:
//
// - the split is a function of the synset alone: a synset is in the test split when the FNV-1a
//   hash of its id ("n00001740"), taken as a fraction of 2^64, is below test-fraction;
// - the tokenizer is a unigram SentencePiece model of `vocabulary` pieces trained on the training
//   split's definitions (the first tokenizer-sentences of them, in file order; 0 = all), cached in
//   the data directory as tokenizer-<key>.model beside a manifest (tokenizer-<key>.json) with the
//   SHA-256 of the WordNet files it came from and of the model; the key hashes both plus the
//   options, so other options or other WordNet files train another model;
// - a sample is its definition's ids, cut or padded with 0 to `length`, padding at the end
//   (padding=end) or before the ids (padding=start, for recurrent models read to their last step);
// - samples=N keeps N of the split's synsets evenly spaced over it (file order sorts them by part
//   of speech, so the first N would be nouns only);
// - task=lexicographer-file (the default) labels a sample with its synset's file; task=next-piece
//   makes the set a language model's: the input is the definition's ids but the last, the labels
//   [length] the ids but the first (the piece each position must predict), padded with -100 (the
//   label the loss heads and measures skip, kDefaultIgnoreIndex) where the input is padded, so
//   classes() is the vocabulary; definitions of one piece, which predict nothing, are left out.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "../data/dataset_options.h"
#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/train/quality.h"
#include "subword_tokenizer.h"
#include "text_datasets.h"
#include "tokenizer_cache.h"
#include "wordnet.h"

namespace d5::text {

namespace {

namespace fs = std::filesystem;

constexpr const char* kGenerator = "wordnet-glosses/1";

struct GlossOptions {
  std::string wordnet_dir;
  int64_t vocabulary, length, samples, tokenizer_sentences;
  double test_fraction;
  bool pad_start, next_piece;
};

bool in_test_split(const WordNetSynset& s, double test_fraction) { return in_hashed_test_split(s.id, test_fraction); }

// The tokenizer of these WordNet files and options.
std::string wordnet_tokenizer(const std::vector<WordNetSynset>& synsets, const GlossOptions& o,
                              const std::string& cache_dir) {
  TokenizerCacheEntry entry;
  entry.cache_dir = cache_dir;
  entry.vocabulary = o.vocabulary;
  for (const auto& f : wordnet_data_files(o.wordnet_dir))
    entry.sources[fs::path(f).filename().string()] = file_hex_digest(f, DigestKind::sha256);
  entry.options = {{"generator", kGenerator},
                   {"test_fraction", o.test_fraction},
                   {"tokenizer_sentences", o.tokenizer_sentences}};
  entry.notes = {{"wordnet_dir", o.wordnet_dir}};
  return cached_tokenizer(std::move(entry), [&] {
    std::vector<std::string> train;
    for (const auto& s : synsets) {
      if (in_test_split(s, o.test_fraction)) continue;
      if (o.tokenizer_sentences > 0 && static_cast<int64_t>(train.size()) >= o.tokenizer_sentences) break;
      train.push_back(s.definition);
    }
    return train;
  });
}

class WordNetGlossesDataset : public Dataset {
 public:
  explicit WordNetGlossesDataset(const DatasetSpec& spec) {
    data::DatasetOptions opts(spec, "wordnet-glosses",
                              {"wordnet-dir", "vocabulary", "length", "padding", "test-fraction", "samples",
                               "tokenizer-sentences", "task"});
    GlossOptions o;
    o.wordnet_dir = opts.get_string("wordnet-dir", "/usr/share/wordnet");
    o.vocabulary = opts.get_int("vocabulary", 2000, 8, 1 << 20);
    o.length = opts.get_int("length", 32, 1, 4096);
    o.samples = opts.get_int("samples", 0, 0);
    o.tokenizer_sentences = opts.get_int("tokenizer-sentences", 0, 0);
    o.test_fraction = opts.get_double("test-fraction", 0.1);
    D5_CHECK_ARG(o.test_fraction > 0 && o.test_fraction < 1, "wordnet-glosses: test-fraction must lie in (0, 1), got {}",
                 o.test_fraction);
    const std::string padding = opts.get_string("padding", "end");
    D5_CHECK_ARG(padding == "end" || padding == "start", "wordnet-glosses: padding must be 'end' or 'start', got '{}'",
                 padding);
    o.pad_start = padding == "start";
    const std::string task = opts.get_string("task", "lexicographer-file");
    D5_CHECK_ARG(task == "lexicographer-file" || task == "next-piece",
                 "wordnet-glosses: task must be 'lexicographer-file' or 'next-piece', got '{}'", task);
    o.next_piece = next_piece_ = task == "next-piece";
    opts.check_all_known();
    D5_CHECK_ARG(spec.split == "train" || spec.split == "test",
                 "wordnet-glosses: split must be 'train' or 'test', got '{}'", spec.split);
    // The tokenizer first: without SentencePiece, refuse before reading anything.
    D5_CHECK(subword_tokenizer_built(), NotBuilt,
             "wordnet-glosses needs SentencePiece, which this d5 was built without: install libsentencepiece-dev "
             "(scripts/install-deps.sh) and rebuild");
    const auto synsets = read_wordnet(o.wordnet_dir);
    tokenizer_ = std::make_unique<SubwordTokenizer>(wordnet_tokenizer(synsets, o, data::data_dir_for(spec)));
    length_ = o.length;
    const bool test = spec.split == "test";
    std::vector<const WordNetSynset*> split;
    for (const auto& s : synsets)
      if (in_test_split(s, o.test_fraction) == test) split.push_back(&s);
    // samples=N: N synsets evenly spaced over the split, so that every part of speech and file
    // keeps its share (the files are sorted by part of speech).
    const auto count = static_cast<int64_t>(split.size());
    const int64_t keep = o.samples > 0 ? std::min(o.samples, count) : count;
    for (int64_t k = 0; k < keep; ++k) {
      const WordNetSynset& s = *split[static_cast<size_t>(k * count / keep)];
      std::vector<int32_t> ids = tokenizer_->encode(s.definition);
      if (o.next_piece && ids.size() < 2) continue;
      // next-piece: position i reads ids[i] and is labelled ids[i + 1].
      std::vector<int32_t> next;
      if (o.next_piece) {
        next.assign(ids.begin() + 1, ids.end());
        ids.pop_back();
      }
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(ids.size()), length_);
      const int64_t at = o.pad_start ? length_ - n : 0;
      lengths_.push_back(n);
      std::vector<int64_t> row(static_cast<size_t>(length_), SubwordTokenizer::kPad);
      std::copy_n(ids.begin(), n, row.begin() + at);
      tokens_.insert(tokens_.end(), row.begin(), row.end());
      labels_.push_back(s.lexicographer_file);
      if (o.next_piece) {
        std::vector<int64_t> targets(static_cast<size_t>(length_), kDefaultIgnoreIndex);
        std::copy_n(next.begin(), n, targets.begin() + at);
        targets_.insert(targets_.end(), targets.begin(), targets.end());
      }
    }
    D5_CHECK_ARG(!labels_.empty(), "wordnet-glosses: the {} split is empty (test-fraction {})", spec.split,
                 o.test_fraction);
  }

  std::string name() const override { return "wordnet-glosses"; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::i64, Shape{length_}}},
            {kDataLabels, TensorDesc{DType::i64, next_piece_ ? Shape{length_} : Shape{}}}};
  }
  int64_t classes() const override {
    return next_piece_ ? tokenizer_->vocabulary() : static_cast<int64_t>(wordnet_lexicographer_files().size());
  }
  int64_t vocabulary() const override { return tokenizer_->vocabulary(); }
  std::vector<bool> word_starts() const override {
    return next_piece_ ? tokenizer_->word_starts() : std::vector<bool>{};
  }
  // next-piece too: the synset's file, for samplers that stratify by it.
  int64_t label(int64_t index) const override { return labels_[checked(index)]; }
  int64_t sample_length(int64_t index) const override { return lengths_[checked(index)]; }

  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor input = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n, length_}});
    Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, next_piece_ ? Shape{n, length_} : Shape{n}});
    int64_t* x = input.data_as<int64_t>();
    int64_t* y = labels.data_as<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = checked(indices[static_cast<size_t>(i)]);
      std::copy_n(tokens_.begin() + static_cast<int64_t>(k) * length_, length_, x + i * length_);
      if (next_piece_) std::copy_n(targets_.begin() + static_cast<int64_t>(k) * length_, length_, y + i * length_);
      else y[i] = labels_[k];
    }
    return {{kDataInput, std::move(input)}, {kDataLabels, std::move(labels)}};
  }

 private:
  size_t checked(int64_t index) const {
    D5_CHECK_ARG(index >= 0 && index < size(), "wordnet-glosses: sample {} is outside [0, {})", index, size());
    return static_cast<size_t>(index);
  }

  std::unique_ptr<SubwordTokenizer> tokenizer_;
  int64_t length_ = 0;
  bool next_piece_ = false;
  std::vector<int64_t> tokens_, lengths_, labels_, targets_;
};

}  // namespace

std::unique_ptr<Dataset> open_wordnet_glosses(const DatasetSpec& spec) {
  return std::make_unique<WordNetGlossesDataset>(spec);
}

}  // namespace d5::text
