// Unit: English number names (src/lv2/text/number_names.h) and the number-words set
// (src/lv2/text/number_words.cpp), checked against the sampling and the split as documented,
// written again here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../../../support/temp_dir.h"
#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_subset.h"
#include "lv2/text/number_names.h"
#include "lv2/text/subword_tokenizer.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

TEST(NumberToWords, NamesNumbersInAmericanEnglishWithoutAndHyphensOrCommas) {
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {0, "zero"},
      {7, "seven"},
      {13, "thirteen"},
      {20, "twenty"},
      {21, "twenty one"},
      {99, "ninety nine"},
      {100, "one hundred"},
      {105, "one hundred five"},
      {110, "one hundred ten"},
      {999, "nine hundred ninety nine"},
      {1000, "one thousand"},
      {4213, "four thousand two hundred thirteen"},
      {10001, "ten thousand one"},
      {999999, "nine hundred ninety nine thousand nine hundred ninety nine"},
      {1000000, "one million"},
      {1000100, "one million one hundred"},
      {40000012, "forty million twelve"},
      {123456789, "one hundred twenty three million four hundred fifty six thousand seven hundred eighty nine"},
      {999999999, "nine hundred ninety nine million nine hundred ninety nine thousand nine hundred ninety nine"}};
  for (const auto& [n, words] : cases) EXPECT_EQ(text::number_to_words(n), words) << n;
}

TEST(NumberToWords, RefusesNumbersOutsideZeroToABillion) {
  EXPECT_THROW(text::number_to_words(-1), InvalidArgument);
  EXPECT_THROW(text::number_to_words(1'000'000'000), InvalidArgument);
  EXPECT_THROW(text::number_to_words(INT64_MIN), InvalidArgument);
}

// FNV-1a, 64 bits, written here from its definition (the split's oracle); the published test
// vectors pin it.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// splitmix64's output function (Steele, Lea & Flood, 2014), which mixes the hash's bits.
uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

TEST(NumberWordsSplit, TheOraclesHashMatchesPublishedTestVectors) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
  // splitmix64 seeded with 0: its first output mixes the state 0 + the golden gamma.
  EXPECT_EQ(splitmix64_mix(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
}

bool in_test(int64_t n, double fraction) {
  return static_cast<double>(splitmix64_mix(fnv1a(std::to_string(n)))) < fraction * 0x1p64;
}

// Mixed, the hash splits numbers of every length near the fraction, and neighbours apart.
TEST(NumberWordsSplit, EveryLengthOfNumeralIsSplitNearTheFraction) {
  std::vector<int64_t> in_test_of_digits(10);
  for (int64_t n = 0; n < 1'000'000; ++n) in_test_of_digits[std::to_string(n).size()] += in_test(n, 0.2);
  EXPECT_EQ(in_test_of_digits[1], 1);  // of 10: "4"
  EXPECT_EQ(in_test_of_digits[2], 13);  // of 90
  for (int64_t d = 3; d <= 6; ++d) {
    const double all = 9 * std::pow(10.0, static_cast<double>(d - 1));
    EXPECT_NEAR(static_cast<double>(in_test_of_digits[static_cast<size_t>(d)]) / all, 0.2, 0.02) << d << " digits";
  }
  int64_t mixed = 0;  // hundreds holding numbers of both splits
  for (int64_t h = 1000; h < 10'000; h += 100) {
    int64_t k = 0;
    for (int64_t n = h; n < h + 100; ++n) k += in_test(n, 0.2);
    mixed += k > 0 && k < 100;
  }
  EXPECT_EQ(mixed, 90);
}

// The numbers of a split as docs/text-datasets.md describes their draw.
std::vector<int64_t> documented_numbers(uint64_t seed, const std::string& split, int64_t count, int max_digits = 6,
                                        double fraction = 0.2) {
  static constexpr int64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  RngStream rng(seed, "number-words/" + split);
  std::vector<int64_t> out;
  while (static_cast<int64_t>(out.size()) < count) {
    const auto d = 1 + rng.below(static_cast<uint64_t>(max_digits));
    const int64_t first = d == 1 ? 0 : kPow10[d - 1], last = kPow10[d];  // [first, last)
    const int64_t n = first + static_cast<int64_t>(rng.below(static_cast<uint64_t>(last - first)));
    if (in_test(n, fraction) == (split == "test")) out.push_back(n);
  }
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t words_in(const std::string& s) {
  std::istringstream in(s);
  return static_cast<size_t>(std::distance(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()));
}

class NumberWords : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_datasets();
    if (!text::subword_tokenizer_built())
      GTEST_SKIP() << "this build has no SentencePiece (Debian: libsentencepiece-dev), which number-words needs";
  }

  std::unique_ptr<Dataset> open(const std::string& split, std::map<std::string, std::string> options = {},
                                uint64_t seed = 5) {
    DatasetSpec spec;
    spec.name = "number-words";
    spec.data_dir = cache_dir().string();
    spec.split = split;
    spec.seed = seed;
    spec.options = std::move(options);
    return open_dataset(spec);
  }
  fs::path cache_dir() const { return dir_.path / "cache"; }
  std::vector<fs::path> cache_files(const std::string& extension) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(cache_dir()))
      if (e.path().extension() == extension) out.push_back(e.path());
    return out;
  }
  // The tokenizer the set cached (the one there is).
  std::unique_ptr<text::SubwordTokenizer> tokenizer() const {
    const auto models = cache_files(".model");
    EXPECT_EQ(models.size(), 1u);
    return std::make_unique<text::SubwordTokenizer>(read_bytes(models.at(0)));
  }

  test::TempDir dir_{"d5-number-words"};
};

struct Rows {
  std::vector<int64_t> input, decoder_input, labels;
};

Rows rows(const Dataset& d, int64_t i) {
  const int64_t index[] = {i};
  const Batch b = d.fetch(index);
  auto values = [&](const char* name) {
    const Tensor& t = b.at(name);
    return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
  };
  return {values(kDataInput), values(kDataDecoderInput), values(kDataLabels)};
}

std::vector<int64_t> padded(const std::vector<int32_t>& ids, int64_t length, int64_t pad) {
  std::vector<int64_t> out(ids.begin(), ids.end());
  out.resize(static_cast<size_t>(length), pad);
  return out;
}

std::vector<int32_t> with(std::vector<int32_t> ids, int64_t token, bool front) {
  ids.insert(front ? ids.begin() : ids.end(), static_cast<int32_t>(token));
  return ids;
}

TEST_F(NumberWords, TheSplitsHoldTheDocumentedDrawsOfDisjointNumbers) {
  const auto train = open("train", {{"samples", "3000"}}), test = open("test", {{"samples", "600"}});
  const auto want_train = documented_numbers(5, "train", 3000), want_test = documented_numbers(5, "test", 600);
  ASSERT_EQ(train->size(), 3000);
  ASSERT_EQ(test->size(), 600);
  const auto tok = tokenizer();
  std::set<std::vector<int64_t>> train_inputs;
  std::array<int64_t, 6> strata{};
  for (int64_t i = 0; i < train->size(); ++i) {
    const int64_t n = want_train[static_cast<size_t>(i)];
    const Rows r = rows(*train, i);
    ASSERT_EQ(r.input, padded(tok->encode(std::to_string(n)), 9, 0)) << "sample " << i << ": " << n;
    EXPECT_EQ(train->label(i), static_cast<int64_t>(std::to_string(n).size()) - 1) << n;
    ++strata.at(static_cast<size_t>(train->label(i)));
    train_inputs.insert(r.input);
  }
  for (int64_t i = 0; i < test->size(); ++i) {
    const int64_t n = want_test[static_cast<size_t>(i)];
    const Rows r = rows(*test, i);
    ASSERT_EQ(r.input, padded(tok->encode(std::to_string(n)), 9, 0)) << "sample " << i << ": " << n;
    // A numeral's ids name it alone: no test numeral is among the training ones.
    EXPECT_FALSE(train_inputs.count(r.input)) << n << " is in both splits";
  }
  // The digit count is uniform: 500 of each expected.
  for (int64_t c : strata) EXPECT_NEAR(c, 500, 120);
  // Another fraction moves numbers between the splits by the same hash (and trains its own
  // tokenizer, on its own training split).
  const fs::path first_model = cache_files(".model").at(0);
  const auto half = open("test", {{"samples", "200"}, {"test-fraction", "0.5"}});
  const auto models = cache_files(".model");
  ASSERT_EQ(models.size(), 2u);
  const text::SubwordTokenizer half_tok(read_bytes(models[models[0] == first_model ? 1 : 0]));
  const auto want_half = documented_numbers(5, "test", 200, 6, 0.5);
  for (int64_t i = 0; i < half->size(); ++i)
    ASSERT_EQ(rows(*half, i).input, padded(half_tok.encode(std::to_string(want_half[static_cast<size_t>(i)])), 9, 0))
        << i;
}

// input: the source's ids padded with 0; decoder_input: BOS and the target's ids padded with 0;
// labels: the target's ids and EOS padded with -100; in both directions, with one tokenizer.
TEST_F(NumberWords, SamplesAreTheSourceAndTheTargetBehindBosAndBeforeEos) {
  const auto words = open("train", {{"samples", "500"}}), numerals = open("train", {{"samples", "500"}, {"direction", "to-numerals"}});
  const auto tok = tokenizer();  // one model for both directions
  const int64_t V = tok->vocabulary(), bos = V, eos = V + 1;
  EXPECT_GE(V, 40);
  EXPECT_LE(V, 128);
  for (const auto* d : {words.get(), numerals.get()}) {
    EXPECT_EQ(d->name(), "number-words");
    EXPECT_EQ(d->vocabulary(), V + 2);
    EXPECT_EQ(d->classes(), V + 2);
    EXPECT_EQ(d->end_token(), eos);
    const std::vector<bool> starts = d->word_starts();
    ASSERT_EQ(static_cast<int64_t>(starts.size()), V + 2);
    EXPECT_EQ(std::vector<bool>(starts.begin(), starts.end() - 2), tok->word_starts());
    EXPECT_FALSE(starts[static_cast<size_t>(bos)]);
    EXPECT_FALSE(starts[static_cast<size_t>(eos)]);
  }
  // A range of the set (d5 train --test-range) keeps the end token and the word starts.
  const std::shared_ptr<const Dataset> shared = open("train", {{"samples", "50"}});
  EXPECT_EQ(SubsetDataset(shared, IndexRange{0, 10}).end_token(), eos);
  EXPECT_EQ(SubsetDataset(shared, IndexRange{0, 10}).word_starts(), shared->word_starts());
  EXPECT_EQ(words->sample_descs(), (std::map<std::string, TensorDesc>{{kDataInput, {DType::i64, Shape{9}}},
                                                                      {kDataDecoderInput, {DType::i64, Shape{12}}},
                                                                      {kDataLabels, {DType::i64, Shape{12}}}}));
  EXPECT_EQ(numerals->sample_descs(), (std::map<std::string, TensorDesc>{{kDataInput, {DType::i64, Shape{11}}},
                                                                         {kDataDecoderInput, {DType::i64, Shape{10}}},
                                                                         {kDataLabels, {DType::i64, Shape{10}}}}));
  const auto numbers = documented_numbers(5, "train", 500);
  const std::vector<bool> starts = words->word_starts();
  for (int64_t i = 0; i < words->size(); ++i) {
    const int64_t n = numbers[static_cast<size_t>(i)];
    const std::string numeral = std::to_string(n), name = text::number_to_words(n);
    const Rows w = rows(*words, i), r = rows(*numerals, i);
    ASSERT_EQ(w.input, padded(tok->encode(numeral), 9, 0)) << n;
    ASSERT_EQ(w.decoder_input, padded(with(tok->encode(name), bos, true), 12, 0)) << n;
    ASSERT_EQ(w.labels, padded(with(tok->encode(name), eos, false), 12, -100)) << n;
    ASSERT_EQ(r.input, padded(tok->encode(name), 11, 0)) << n;
    ASSERT_EQ(r.decoder_input, padded(with(tok->encode(numeral), bos, true), 10, 0)) << n;
    ASSERT_EQ(r.labels, padded(with(tok->encode(numeral), eos, false), 10, -100)) << n;
    EXPECT_EQ(words->sample_length(i), static_cast<int64_t>(tok->encode(numeral).size()));
    EXPECT_EQ(numerals->sample_length(i), static_cast<int64_t>(tok->encode(name).size()));
    // Teacher forcing: each labelled position's piece is the next position's decoder input.
    const auto end = static_cast<size_t>(std::find(w.labels.begin(), w.labels.end(), eos) - w.labels.begin());
    ASSERT_LT(end, w.labels.size());
    EXPECT_EQ(w.decoder_input[0], bos);
    for (size_t t = 0; t < end; ++t) EXPECT_EQ(w.decoder_input[t + 1], w.labels[t]) << n << " at " << t;
    EXPECT_EQ(std::count(w.labels.begin(), w.labels.end(), -100), static_cast<long>(w.labels.size() - end - 1));
    // The ids spell the text: as many word-initial pieces as words (one for a numeral).
    const auto word_pieces = std::count_if(w.labels.begin(), w.labels.begin() + static_cast<long>(end),
                                           [&](int64_t id) { return starts[static_cast<size_t>(id)]; });
    EXPECT_EQ(static_cast<size_t>(word_pieces), words_in(name)) << name;
    EXPECT_EQ(std::count_if(w.input.begin(), w.input.end(), [&](int64_t id) { return starts[static_cast<size_t>(id)]; }), 1);
  }
  // A batch holds the rows of its indices in order.
  const int64_t indices[] = {4, 0, 4};
  const Batch b = words->fetch(indices);
  ASSERT_EQ(b.size(), 3u);
  for (const auto& [name, t] : b) {
    EXPECT_EQ(t.dtype(), DType::i64) << name;
    EXPECT_EQ(t.shape(), (Shape{3, name == kDataInput ? 9 : 12})) << name;
  }
  const auto* y = b.at(kDataLabels).data_as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(y + 12, y + 24), rows(*words, 0).labels);
  EXPECT_EQ(std::vector<int64_t>(y + 24, y + 36), rows(*words, 4).labels);
  const int64_t outside[] = {words->size()};
  EXPECT_THROW(words->fetch(outside), InvalidArgument);
  EXPECT_THROW(words->label(-1), InvalidArgument);
}

// The default lengths bound every number of up to six digits, not only those drawn: checked on
// every 7th number and on the longest ones docs/text-datasets.md names.
TEST_F(NumberWords, TheDefaultLengthsHoldEveryNumberOfUpToSixDigits) {
  const auto train = open("train"), test = open("test");
  EXPECT_EQ(train->size(), 20'000);
  EXPECT_EQ(test->size(), 1'000);
  const auto tok = tokenizer();
  size_t numeral = 0, name = 0;
  auto measure = [&](int64_t n) {
    numeral = std::max(numeral, tok->encode(std::to_string(n)).size());
    name = std::max(name, tok->encode(text::number_to_words(n)).size());
  };
  for (int64_t n = 0; n < 1'000'000; n += 7) measure(n);
  for (int64_t n : {100000, 200000, 113113, 117117, 777777}) measure(n);
  EXPECT_LE(numeral + 2, 9u);          // source-length with to-words
  EXPECT_LE(name + 1 + 2, 12u);        // target-length with to-words
  EXPECT_GE(name + 1 + 2, 12u - 2);    // and tight
}

TEST_F(NumberWords, TwoOpensGiveTheSameBatchesAndOtherSeedsOtherNumbers) {
  const auto a = open("train", {{"samples", "300"}}), b = open("train", {{"samples", "300"}});
  const auto c = open("train", {{"samples", "300"}}, 6);
  std::vector<int64_t> all(300);
  for (int64_t i = 0; i < 300; ++i) all[static_cast<size_t>(i)] = i;
  const Batch x = a->fetch(all), y = b->fetch(all), z = c->fetch(all);
  for (const char* name : {kDataInput, kDataDecoderInput, kDataLabels}) {
    const Tensor &tx = x.at(name), &ty = y.at(name), &tz = z.at(name);
    ASSERT_EQ(tx.shape(), ty.shape());
    EXPECT_TRUE(std::equal(tx.data_as<int64_t>(), tx.data_as<int64_t>() + tx.numel(), ty.data_as<int64_t>())) << name;
    EXPECT_FALSE(std::equal(tx.data_as<int64_t>(), tx.data_as<int64_t>() + tx.numel(), tz.data_as<int64_t>())) << name;
  }
  // The seed draws other numbers, read with the same tokenizer.
  EXPECT_EQ(cache_files(".model").size(), 1u);
  EXPECT_EQ(c->vocabulary(), a->vocabulary());
}

TEST_F(NumberWords, TheTokenizerIsTrainedOnceCachedWithChecksumsAndRetrainedWhenDamaged) {
  const auto first = open("train", {{"samples", "100"}});
  const auto models = cache_files(".model");
  ASSERT_EQ(models.size(), 1u);
  const std::string model = read_bytes(models[0]);
  const auto manifest = nlohmann::json::parse(read_bytes(cache_files(".json").at(0)));
  EXPECT_EQ(manifest["model_sha256"], sha256_hex(model));
  EXPECT_EQ(manifest["options"]["vocabulary"], 128);
  EXPECT_EQ(manifest["options"]["max_digits"], 6);
  EXPECT_EQ(manifest["training_sentences"], 40'000);  // 20,000 numerals and their names
  const auto written = fs::last_write_time(models[0]);
  // The test split, another direction, seed or sample count read the same model.
  open("test", {{"samples", "100"}, {"direction", "to-numerals"}}, 9);
  EXPECT_EQ(fs::last_write_time(models[0]), written);
  EXPECT_EQ(cache_files(".model").size(), 1u);
  // A damaged byte disagrees with the manifest's checksum: trained again, to the same bytes.
  std::string damaged = model;
  damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 0x20);
  std::ofstream(models[0], std::ios::binary | std::ios::trunc) << damaged;
  const auto again = open("train", {{"samples", "100"}});
  EXPECT_EQ(read_bytes(models[0]), model);
  EXPECT_EQ(again->vocabulary(), first->vocabulary());
  // Options the tokenizer depends on train another model beside it.
  open("train", {{"samples", "100"}, {"vocabulary", "56"}, {"target-length", "40"}});
  EXPECT_EQ(cache_files(".model").size(), 2u);
}

void expect_refusal(const std::function<void()>& f, const std::string& says) {
  try {
    f();
    FAIL() << "no error; expected one saying '" << says << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST_F(NumberWords, BadOptionsSayWhatToFix) {
  expect_refusal([&] { open("train", {{"vocab", "128"}}); }, "no option 'vocab'");
  expect_refusal([&] { open("train", {{"direction", "to-word"}}); }, "direction must be 'to-words' or 'to-numerals'");
  expect_refusal([&] { open("train", {{"max-digits", "10"}}); }, "max-digits=10 must be at most 9");
  expect_refusal([&] { open("train", {{"max-digits", "0"}}); }, "max-digits=0 must be at least 1");
  expect_refusal([&] { open("train", {{"test-fraction", "1"}}); }, "test-fraction must lie in (0, 1)");
  expect_refusal([&] { open("validation"); }, "split must be 'train' or 'test'");
  expect_refusal([&] { open("train", {{"samples", "100"}, {"target-length", "6"}}); }, "raise target-length to at least");
  expect_refusal([&] { open("train", {{"samples", "100"}, {"source-length", "2"}}); }, "raise source-length to at least");
  // Nine digits name numbers longer than the defaults allow; the refusal says how long (their
  // numerals still fit the source's 9 pieces under that tokenizer).
  expect_refusal([&] { open("train", {{"samples", "300"}, {"max-digits", "9"}}); }, "raise target-length");
  const auto nine = open("train", {{"samples", "300"}, {"max-digits", "9"}, {"source-length", "16"}, {"target-length", "64"}});
  EXPECT_EQ(nine->sample_descs().at(kDataLabels), (TensorDesc{DType::i64, Shape{64}}));
}

}  // namespace
}  // namespace d5
