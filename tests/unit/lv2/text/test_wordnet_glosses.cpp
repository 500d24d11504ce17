// Unit: the wordnet-glosses set (src/lv2/text/wordnet_glosses.cpp) on a small WordNet written by
// the test, and on Debian's when it is installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../../../support/temp_dir.h"
#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_subset.h"
#include "lv2/text/subword_tokenizer.h"
#include "lv2/text/wordnet.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

// FNV-1a, 64 bits, written here from its definition (the split's oracle); the published test
// vectors pin it below.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

TEST(WordNetGlossesSplit, TheOraclesHashMatchesFnvTestVectors) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

bool in_test(const std::string& id, double fraction) { return static_cast<double>(fnv1a(id)) < fraction * 0x1p64; }

// A WordNet of 5 lexicographer files x 80 synsets whose definitions draw on words of their class.
struct SmallWordNet {
  struct Synset {
    std::string id, definition;
    int lexfile;
  };
  std::vector<Synset> synsets;  // in read order: nouns, verbs, adjectives, adverbs

  explicit SmallWordNet(const fs::path& dir) {
    fs::create_directories(dir);
    const std::vector<std::tuple<std::string, char, std::vector<int>>> files = {
        {"data.noun", 'n', {5, 13}}, {"data.verb", 'v', {38}}, {"data.adj", 'a', {0}}, {"data.adv", 'r', {2}}};
    const std::map<int, std::vector<std::string>> words = {
        {5, {"animal", "mammal", "bird", "fish", "fur", "wings", "tail", "predator"}},
        {13, {"food", "dish", "sweet", "baked", "flavor", "fruit", "sauce", "meal"}},
        {38, {"move", "travel", "walk", "run", "quickly", "across", "direction", "go"}},
        {0, {"having", "quality", "being", "able", "not", "full", "of", "state"}},
        {2, {"in", "a", "manner", "way", "degree", "extent", "very", "time"}}};
    uint32_t state = 7;
    auto next = [&state] { return state = state * 1664525u + 1013904223u; };
    int offset = 1000;
    for (const auto& [file, pos, lexfiles] : files) {
      std::ofstream out(dir / file);
      out << "  1 This software and database is being provided to you, the LICENSEE, by  \n";
      for (int lexfile : lexfiles)
        for (int k = 0; k < 80; ++k) {
          std::string def;
          const int n = 3 + static_cast<int>(next() % 6);
          for (int w = 0; w < n; ++w) def += (w ? " " : "") + words.at(lexfile)[next() % 8];
          const std::string off = fmt::format("{:08d}", offset++);
          out << fmt::format("{} {:02d} {} 01 word{} 0 000 | {}; \"an example\"  \n", off, lexfile, pos, k, def);
          synsets.push_back({std::string(1, pos) + off, def, lexfile});
        }
    }
  }
};

class WordNetGlosses : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_datasets();
    if (!text::subword_tokenizer_built())
      GTEST_SKIP() << "this build has no SentencePiece (Debian: libsentencepiece-dev), which wordnet-glosses needs";
  }

  std::unique_ptr<Dataset> open(const std::string& split, std::map<std::string, std::string> options = {}) {
    DatasetSpec spec;
    spec.name = "wordnet-glosses";
    spec.data_dir = (dir_.path / "cache").string();
    spec.split = split;
    options.emplace("wordnet-dir", wordnet_dir().string());
    options.emplace("vocabulary", "60");
    spec.options = std::move(options);
    return open_dataset(spec);
  }
  fs::path wordnet_dir() const { return dir_.path / "wordnet"; }
  std::vector<fs::path> cache_files(const std::string& extension) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_.path / "cache"))
      if (e.path().extension() == extension) out.push_back(e.path());
    return out;
  }

  test::TempDir dir_{"d5-wordnet-glosses"};
  SmallWordNet wordnet_{wordnet_dir()};
};

std::vector<int64_t> row(const Dataset& d, int64_t i) {
  const int64_t index[] = {i};
  const Batch b = d.fetch(index);
  const Tensor& x = b.at(kDataInput);
  return {x.data_as<int64_t>(), x.data_as<int64_t>() + x.numel()};
}

TEST_F(WordNetGlosses, TheSplitIsTheSynsetsHashAndLabelsAreTheirFiles) {
  const auto train = open("train"), test = open("test");
  std::vector<int64_t> want_train, want_test;
  for (const auto& s : wordnet_.synsets) (in_test(s.id, 0.1) ? want_test : want_train).push_back(s.lexfile);
  ASSERT_GT(want_test.size(), 10u);
  ASSERT_EQ(train->size(), static_cast<int64_t>(want_train.size()));
  ASSERT_EQ(test->size(), static_cast<int64_t>(want_test.size()));
  for (int64_t i = 0; i < test->size(); ++i) EXPECT_EQ(test->label(i), want_test[static_cast<size_t>(i)]) << i;
  for (int64_t i = 0; i < train->size(); ++i) EXPECT_EQ(train->label(i), want_train[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(train->classes(), 45);
  const auto d = train->sample_descs();
  EXPECT_EQ(d.at(kDataInput), (TensorDesc{DType::i64, Shape{32}}));
  EXPECT_EQ(d.at(kDataLabels), (TensorDesc{DType::i64, Shape{}}));
  // samples=N: evenly spaced over the split, every file keeping its share.
  const auto some = open("train", {{"samples", "10"}});
  ASSERT_EQ(some->size(), 10);
  for (int64_t k = 0; k < 10; ++k)
    EXPECT_EQ(some->label(k), want_train[static_cast<size_t>(k * static_cast<int64_t>(want_train.size()) / 10)]) << k;
  EXPECT_EQ(open("train", {{"samples", "100000"}})->size(), train->size());
  // Another fraction moves synsets between the splits by the same hash.
  EXPECT_EQ(open("test", {{"test-fraction", "0.5"}})->size(),
            std::count_if(wordnet_.synsets.begin(), wordnet_.synsets.end(),
                          [](const auto& s) { return in_test(s.id, 0.5); }));
}

TEST_F(WordNetGlosses, SamplesAreIdsPaddedWithZeroAtTheEndOrTheStart) {
  const auto end = open("train"), start = open("train", {{"padding", "start"}}), cut = open("train", {{"length", "3"}});
  ASSERT_GE(end->vocabulary(), 40);
  ASSERT_LE(end->vocabulary(), 60);
  for (int64_t i = 0; i < end->size(); i += 7) {
    const int64_t n = end->sample_length(i);
    ASSERT_GE(n, 3) << i;  // three words at least, each a piece or more
    const auto e = row(*end, i), s = row(*start, i), c = row(*cut, i);
    for (int64_t k = 0; k < 32; ++k) {
      const int64_t id = e[static_cast<size_t>(k)];
      if (k < n) {
        EXPECT_GT(id, 0) << "sample " << i << " position " << k << ": the pad id inside the text";
        EXPECT_LT(id, end->vocabulary());
      } else {
        EXPECT_EQ(id, 0) << "sample " << i << " position " << k;
      }
      // The same ids, moved to the end of the row.
      EXPECT_EQ(s[static_cast<size_t>((k + 32 - n) % 32)], id) << "sample " << i << " position " << k;
    }
    EXPECT_EQ(cut->sample_length(i), 3);
    EXPECT_EQ(c, std::vector<int64_t>(e.begin(), e.begin() + 3)) << i;
  }
  // A batch holds the rows of its indices in order.
  const int64_t indices[] = {5, 0, 5};
  const Batch b = end->fetch(indices);
  EXPECT_EQ(b.at(kDataInput).shape(), (Shape{3, 32}));
  EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[1], end->label(0));
  const auto x = b.at(kDataInput).data_as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(x, x + 32), row(*end, 5));
  EXPECT_EQ(std::vector<int64_t>(x + 32, x + 64), row(*end, 0));
  const int64_t outside[] = {end->size()};
  EXPECT_THROW(end->fetch(outside), InvalidArgument);
}

std::vector<int64_t> labels_row(const Dataset& d, int64_t i) {
  const int64_t index[] = {i};
  const Tensor y = d.fetch(index).at(kDataLabels);
  return {y.data_as<int64_t>(), y.data_as<int64_t>() + y.numel()};
}

// task=next-piece: the same ids as the classification set, the input without the last and the
// labels without the first, padding labelled -100; with padding=start both move to the end.
TEST_F(WordNetGlosses, TheNextPieceTaskShiftsTheIdsByOneAndLabelsPaddingMinus100) {
  const auto cls = open("train"), lm = open("train", {{"task", "next-piece"}}),
             lm_start = open("train", {{"task", "next-piece"}, {"padding", "start"}});
  ASSERT_EQ(lm->size(), cls->size());  // every definition here has three words or more
  EXPECT_EQ(lm->classes(), lm->vocabulary());
  EXPECT_EQ(lm->vocabulary(), cls->vocabulary());  // the same tokenizer
  EXPECT_EQ(lm->sample_descs().at(kDataLabels), (TensorDesc{DType::i64, Shape{32}}));
  int64_t checked = 0;
  for (int64_t i = 0; i < cls->size(); i += 5) {
    const int64_t n = cls->sample_length(i);
    if (n >= 32) continue;  // a cut definition: its next piece is not in the classification row
    const auto ids = row(*cls, i), x = row(*lm, i), y = labels_row(*lm, i);
    const auto xs = row(*lm_start, i), ys = labels_row(*lm_start, i);
    ASSERT_EQ(lm->sample_length(i), n - 1) << i;
    for (int64_t k = 0; k < 32; ++k) {
      const auto at = static_cast<size_t>(k);
      EXPECT_EQ(x[at], k < n - 1 ? ids[at] : 0) << "sample " << i << " input " << k;
      EXPECT_EQ(y[at], k < n - 1 ? ids[at + 1] : -100) << "sample " << i << " label " << k;
      const auto moved = static_cast<size_t>((k + 32 - (n - 1)) % 32);
      EXPECT_EQ(xs[moved], x[at]) << "sample " << i << " input " << k;
      EXPECT_EQ(ys[moved], y[at]) << "sample " << i << " label " << k;
    }
    EXPECT_EQ(lm->label(i), cls->label(i));  // the synset's file, for samplers
    ++checked;
  }
  EXPECT_GT(checked, 50);
  const int64_t indices[] = {3, 0};
  EXPECT_EQ(lm->fetch(indices).at(kDataLabels).shape(), (Shape{2, 32}));
  EXPECT_THROW(open("train", {{"task", "translation"}}), InvalidArgument);
}

// Word starts (per-word perplexity's word count): a definition's ids hold exactly as many
// word-initial pieces as the definition has words, since SentencePiece begins every word with a
// piece of its own; the classification task has none.
TEST_F(WordNetGlosses, WordStartsCountTheWordsOfEveryDefinition) {
  const auto cls = open("train"), lm = open("train", {{"task", "next-piece"}});
  EXPECT_TRUE(cls->word_starts().empty());
  const std::vector<bool> starts = lm->word_starts();
  ASSERT_EQ(static_cast<int64_t>(starts.size()), lm->classes());
  EXPECT_FALSE(starts[0]);  // padding
  // A range of the set (d5 train --test-range) keeps them.
  const std::shared_ptr<const Dataset> shared = open("train", {{"task", "next-piece"}});
  EXPECT_EQ(SubsetDataset(shared, IndexRange{0, 10}).word_starts(), starts);
  std::vector<const SmallWordNet::Synset*> train;
  for (const auto& syn : wordnet_.synsets)
    if (!in_test(syn.id, 0.1)) train.push_back(&syn);
  ASSERT_EQ(static_cast<int64_t>(train.size()), cls->size());
  int64_t checked = 0;
  for (int64_t i = 0; i < cls->size(); ++i) {
    const int64_t n = cls->sample_length(i);
    if (n >= 32) continue;  // cut at 32 pieces
    const auto ids = row(*cls, i);
    std::istringstream text(train[static_cast<size_t>(i)]->definition);
    const auto words = std::distance(std::istream_iterator<std::string>(text), std::istream_iterator<std::string>());
    const auto counted =
        std::count_if(ids.begin(), ids.begin() + n, [&](int64_t id) { return starts[static_cast<size_t>(id)]; });
    EXPECT_EQ(counted, words) << train[static_cast<size_t>(i)]->definition;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(WordNetGlosses, TheTokenizerIsTrainedOnceCachedWithChecksumsAndRetrainedWhenDamaged) {
  open("train");
  const auto models = cache_files(".model");
  ASSERT_EQ(models.size(), 1u);
  const std::string model = read_bytes(models[0]);
  const auto manifest = nlohmann::json::parse(read_bytes(cache_files(".json").at(0)));
  EXPECT_EQ(manifest["model_sha256"], sha256_hex(model));
  EXPECT_EQ(manifest["sources"]["data.noun"], sha256_hex(read_bytes(wordnet_dir() / "data.noun")));
  EXPECT_EQ(manifest["options"]["vocabulary"], 60);
  // Training sentences: the training split's definitions, without their examples.
  EXPECT_EQ(manifest["training_sentences"],
            std::count_if(wordnet_.synsets.begin(), wordnet_.synsets.end(),
                          [](const auto& s) { return !in_test(s.id, 0.1); }));
  const auto written = fs::last_write_time(models[0]);
  open("test");  // the test split reuses the model: nothing is written
  EXPECT_EQ(fs::last_write_time(models[0]), written);
  // A damaged model disagrees with its manifest's checksum: trained again, to the same bytes (one
  // thread, the same sentences).
  std::ofstream(models[0], std::ios::app) << "x";
  const auto again = open("train");
  EXPECT_EQ(read_bytes(models[0]), model);
  EXPECT_EQ(again->size(), open("train")->size());
  // Other options, or another WordNet, train another model beside it.
  open("train", {{"vocabulary", "50"}});
  EXPECT_EQ(cache_files(".model").size(), 2u);
  std::ofstream(wordnet_dir() / "data.adv", std::ios::app)
      << "09999999 02 r 01 extra 0 000 | in a very extra way  \n";
  open("train");
  EXPECT_EQ(cache_files(".model").size(), 3u);
}

TEST_F(WordNetGlosses, BadOptionsAndAMissingWordNetSayWhatToFix) {
  EXPECT_THROW(open("train", {{"vocab", "10"}}), InvalidArgument);
  EXPECT_THROW(open("train", {{"padding", "left"}}), InvalidArgument);
  EXPECT_THROW(open("train", {{"test-fraction", "1"}}), InvalidArgument);
  EXPECT_THROW(open("validation"), InvalidArgument);
  try {
    open("train", {{"wordnet-dir", (dir_.path / "none").string()}});
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("install Debian's wordnet-base"), std::string::npos) << e.what();
  }
}

// Debian's WordNet with a tokenizer trained on its first 2,000 training definitions: the split
// sizes are the hash's, over every synset.
TEST_F(WordNetGlosses, DebiansWordNetSplitsByTheHash) {
  const std::string dir = "/usr/share/wordnet";
  if (!fs::exists(dir + "/data.noun")) GTEST_SKIP() << "no WordNet at " << dir << " (Debian: wordnet-base)";
  const std::map<std::string, std::string> o = {
      {"wordnet-dir", dir}, {"tokenizer-sentences", "2000"}, {"vocabulary", "300"}};
  const auto test = open("test", o);
  int64_t want = 0;
  for (const auto& s : text::read_wordnet(dir)) want += in_test(s.id, 0.1);
  EXPECT_EQ(test->size(), want);
  EXPECT_EQ(test->size() + open("train", o)->size(), 117'659);
  EXPECT_EQ(nlohmann::json::parse(read_bytes(cache_files(".json").at(0)))["training_sentences"], 2000);
}

}  // namespace
}  // namespace d5
