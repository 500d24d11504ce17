// Unit: corpus BLEU (bleu.h) on hand-computed cases, and the bleu quality measure reading class
// scores up to the end token.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/core/error.h"
#include "deep500/train/bleu.h"
#include "deep500/train/quality.h"

namespace d5 {
namespace {

BleuSentence words(std::initializer_list<int64_t> ids) {
  BleuSentence s;
  for (int64_t i : ids) s.push_back({i});
  return s;
}

// "the cat sat on the mat" against "the cat sat on a mat": clipped matches 5/6 (the second "the"
// is clipped), 3/5, 2/4, 1/3; equal lengths, no brevity penalty.
TEST(Bleu, ClipsRepeatedWordsAndTakesTheGeometricMean) {
  BleuCounts c;
  c.add(words({1, 2, 3, 4, 1, 5}), words({1, 2, 3, 4, 6, 5}));
  EXPECT_DOUBLE_EQ(c.precision(1), 5.0 / 6);
  EXPECT_DOUBLE_EQ(c.precision(2), 3.0 / 5);
  EXPECT_DOUBLE_EQ(c.precision(3), 2.0 / 4);
  EXPECT_DOUBLE_EQ(c.precision(4), 1.0 / 3);
  EXPECT_NEAR(c.score(), 100 * std::pow(1.0 / 12, 0.25), 1e-12);  // 53.73
}

// Every n-gram right but half the length: exp(1 - 8/4) = 1/e.
TEST(Bleu, PenalisesShortHypotheses) {
  BleuCounts c;
  c.add(words({1, 2, 3, 4}), words({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_NEAR(c.score(), 100 * std::exp(-1.0), 1e-12);
  BleuCounts longer;  // a longer hypothesis is not rewarded: its precisions fall instead
  longer.add(words({1, 2, 3, 4, 5, 6, 7, 8, 9}), words({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_NEAR(longer.score(), 100 * std::pow((8.0 / 9) * (7.0 / 8) * (6.0 / 7) * (5.0 / 6), 0.25), 1e-12);
}

// Corpus BLEU sums the counts over sentences: (4/10 * 3/8 * 2/6 * 1/4)^(1/4), not the mean (50) of
// the sentences' scores (100 and 0).
TEST(Bleu, SumsCountsOverTheCorpus) {
  BleuCounts c;
  c.add(words({1, 2, 3, 4}), words({1, 2, 3, 4}));
  c.add(words({5, 6, 7, 8, 9, 10}), words({11, 12, 13, 14, 15, 16}));
  EXPECT_NEAR(c.score(), 100 * std::pow(0.0125, 0.25), 1e-12);  // 33.44
  EXPECT_EQ(c.hypothesis_length(), 10);
  EXPECT_EQ(c.reference_length(), 10);
}

TEST(Bleu, IsZeroWithoutAFourGramMatchOrAnything) {
  BleuCounts three;
  three.add(words({1, 2, 3}), words({1, 2, 3}));  // no 4-grams at all
  EXPECT_EQ(three.score(), 0.0);
  EXPECT_TRUE(std::isnan(three.precision(4)));
  EXPECT_EQ(BleuCounts{}.score(), 0.0);
  EXPECT_THROW(three.precision(5), InvalidArgument);
}

TEST(Bleu, GroupsPiecesIntoWords) {
  // Pieces 10 and 12 begin words, 11 continues one; a first piece that continues still opens one.
  std::vector<bool> starts(13, false);
  starts[10] = starts[12] = true;
  EXPECT_EQ(group_words({11, 10, 11, 12}, starts), (BleuSentence{{11}, {10, 11}, {12}}));
  EXPECT_EQ(group_words({10, 11}, {}), (BleuSentence{{10}, {11}}));
  // The same pieces in other words match nothing: "10 11 | 12" against "10 | 12 11" shares no word,
  // though every piece; a hypothesis word "10 10" is two words, one of them clipped.
  BleuCounts c;
  c.add(group_words({10, 11, 12}, starts), group_words({10, 12, 11}, starts));
  EXPECT_DOUBLE_EQ(c.precision(1), 0.0);
  BleuCounts pieces;
  pieces.add(group_words({10, 11, 12}, {}), group_words({10, 12, 11}, {}));
  EXPECT_DOUBLE_EQ(pieces.precision(1), 1.0);
}

// Best classes 2 3 4 5 2 1 0 with end token 1: the hypothesis is 2 3 4 5 2; the labels 2 3 4 5 1
// -100 -100 give the reference 2 3 4 5. Clipped precisions 4/5, 3/4, 2/3, 1/2; the hypothesis is
// longer, so no brevity penalty. A second row past `rows` (a padding row) is not read.
TEST(Bleu, MeasureReadsTheBestClassesUpToTheEndToken) {
  QualitySettings s;
  s.end_token = 1;
  auto m = make_quality_measure("bleu", s);
  EXPECT_EQ(m->name(), "bleu");
  EXPECT_TRUE(m->higher_is_better());
  EXPECT_EQ(m->highest(), 100);
  EXPECT_TRUE(std::isnan(m->value()));
  const int64_t best[] = {2, 3, 4, 5, 2, 1, 0};
  Tensor scores(DType::f32, Shape{2, 7, 6});
  for (int64_t t = 0; t < 7; ++t) scores.set(t * 6 + best[t], 1.0);
  Tensor labels = Tensor::from_values<int64_t>(Shape{2, 7}, {2, 3, 4, 5, 1, -100, -100, 0, 0, 0, 0, 0, 0, 0});
  m->observe(scores, labels, 1);
  EXPECT_NEAR(m->value(), 100 * std::pow(0.2, 0.25), 1e-12);  // 66.87

  // Without an end token there is no telling where a hypothesis stops.
  auto no_end = make_quality_measure("bleu");
  EXPECT_THROW(no_end->observe(scores, labels, 1), InvalidArgument);
  // Scores of one position per row are no sequence.
  EXPECT_THROW(m->observe(Tensor(DType::f32, Shape{2, 6}), Tensor(DType::i64, Shape{2}), 1), InvalidArgument);
}

}  // namespace
}  // namespace d5
