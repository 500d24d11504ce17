// Quality measures against hand-derived values (ties, padding, partial batches, overflow-prone
// logits) and quality targets: parsing, direction, reachability.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "deep500/core/error.h"
#include "deep500/train/quality.h"
#include "deep500/train/quality_target.h"

namespace d5 {
namespace {

double measure(const std::string& name, const Tensor& prediction, const Tensor& labels, int64_t rows = -1,
               const QualitySettings& s = {}) {
  auto m = make_quality_measure(name, s);
  m->reset();
  m->observe(prediction, labels, rows < 0 ? prediction.shape()[0] : rows);
  return m->value();
}

// Four rows of three classes; the label's place among the scores (0 = argmax, ties to the lower class):
// row 0 -> 0, row 1 -> 1 (tie with class 0, which wins), row 2 -> 0, row 3 -> 2.
const Tensor kScores = Tensor::from_values<float>(Shape{4, 3}, {0.1f, 0.9f, 0.0f,   // label 1
                                                                2.0f, 2.0f, 1.0f,   // label 1
                                                                -1.f, -2.f, -0.5f,  // label 2
                                                                0.f, 1.f, 2.f});    // label 0
const Tensor kLabels = Tensor::from_values<int64_t>(Shape{4}, {1, 1, 2, 0});

TEST(QualityMeasures, TopKCountsTheLabelsPlaceWithTiesToTheLowerClass) {
  EXPECT_DOUBLE_EQ(measure("accuracy", kScores, kLabels), 2.0 / 4);
  EXPECT_DOUBLE_EQ(measure("top1", kScores, kLabels), 2.0 / 4);
  EXPECT_DOUBLE_EQ(measure("top2", kScores, kLabels), 3.0 / 4);
  EXPECT_DOUBLE_EQ(measure("top3", kScores, kLabels), 1.0);
  EXPECT_DOUBLE_EQ(measure("top7", kScores, kLabels), 1.0);
  // Only the real rows of a padded batch count.
  EXPECT_DOUBLE_EQ(measure("accuracy", kScores, kLabels, 2), 1.0 / 2);
  EXPECT_DOUBLE_EQ(measure("exact_match", kScores, kLabels), 2.0 / 4);  // one position per row
}

TEST(QualityMeasures, AccumulateOverBatchesUntilReset) {
  auto m = make_quality_measure("accuracy");
  m->reset();
  EXPECT_TRUE(std::isnan(m->value()));  // nothing counted yet
  m->observe(kScores, kLabels, 3);  // 2 of 3
  m->observe(kScores, kLabels, 4);  // 2 of 4
  EXPECT_DOUBLE_EQ(m->value(), 4.0 / 7);
  m->reset();
  m->observe(kScores, kLabels, 1);
  EXPECT_DOUBLE_EQ(m->value(), 1.0);
}

// Two sequences of three positions, two classes; -100 marks padding.
// seq 0: right, wrong, right -> not an exact match; seq 1: right, padding, padding -> exact match.
const Tensor kSeqScores = Tensor::from_values<float>(Shape{2, 3, 2}, {1, 0, 0, 1, 0, 1,  //
                                                                      0, 3, 9, 9, 9, 9});
const Tensor kSeqLabels = Tensor::from_values<int64_t>(Shape{2, 3}, {0, 0, 1, 1, -100, -100});

TEST(QualityMeasures, SequencesCountLabelledPositionsAndSkipPadding) {
  EXPECT_DOUBLE_EQ(measure("accuracy", kSeqScores, kSeqLabels), 3.0 / 4);
  EXPECT_DOUBLE_EQ(measure("exact_match", kSeqScores, kSeqLabels), 1.0 / 2);
  EXPECT_DOUBLE_EQ(measure("accuracy", kSeqScores, kSeqLabels, 1), 2.0 / 3);
  // Another padding label: -100 is now a label out of range.
  EXPECT_THROW(measure("accuracy", kSeqScores, kSeqLabels, -1, QualitySettings{-1}), InvalidArgument);
  const Tensor all_padding = Tensor::from_values<int64_t>(Shape{2, 3}, {-100, -100, -100, -100, -100, -100});
  EXPECT_TRUE(std::isnan(measure("accuracy", kSeqScores, all_padding)));
  EXPECT_TRUE(std::isnan(measure("exact_match", kSeqScores, all_padding)));  // rows without labels are not counted
  EXPECT_TRUE(std::isnan(measure("perplexity", kSeqScores, all_padding)));
}

TEST(QualityMeasures, PerplexityIsTheExponentiatedMeanCrossEntropy) {
  // Uniform scores over 4 classes: every label has probability 1/4.
  const Tensor uniform = Tensor::from_values<float>(Shape{2, 4}, {0, 0, 0, 0, 5, 5, 5, 5});
  EXPECT_NEAR(measure("perplexity", uniform, Tensor::from_values<int64_t>(Shape{2}, {3, 0})), 4.0, 1e-12);
  // Scores (0, ln 3): p(1) = 3/4, p(0) = 1/4; labels 1 and 0 -> exp((ln 4/3 + ln 4) / 2) = sqrt(16/3).
  const auto ln3 = static_cast<float>(std::log(3.0));
  const Tensor two = Tensor::from_values<float>(Shape{2, 2}, {0, ln3, 0, ln3});
  EXPECT_NEAR(measure("perplexity", two, Tensor::from_values<int64_t>(Shape{2}, {1, 0})), std::sqrt(16.0 / 3),
              1e-6);  // ln 3 rounded to f32: 2.4e-8 relative in p
  // Logits far beyond exp's range: a sure right answer costs nothing, a sure wrong one 1000 nats.
  const Tensor huge = Tensor::from_values<float>(Shape{1, 2}, {1000, 0});
  EXPECT_NEAR(measure("perplexity", huge, Tensor::from_values<int64_t>(Shape{1}, {0})), 1.0, 1e-12);
  EXPECT_TRUE(std::isinf(measure("perplexity", huge, Tensor::from_values<int64_t>(Shape{1}, {1}))));
  // Padding is skipped: sequence 0's positions 0 and 2 and sequence 1's position 0.
  const double nll = std::log(1 + std::exp(-1.0)) * 2 + std::log(1 + std::exp(1.0)) + std::log(1 + std::exp(-3.0));
  EXPECT_NEAR(measure("perplexity", kSeqScores, kSeqLabels), std::exp(nll / 4), 1e-9);
}

// Uniform scores over 4 pieces (each costs ln 4), of which 1 and 3 begin words. Row 0 spells
// "1 2 | 3": two words; row 1 starts inside a word ("2", counted as one) and then "3": two words.
// 5 pieces over 4 words: per-word perplexity 4^(5/4), per-piece 4.
TEST(QualityMeasures, WordPerplexitySpreadsThePiecesLikelihoodOverTheWords) {
  Tensor uniform(TensorDesc{DType::f32, Shape{2, 3, 4}});
  for (int64_t i = 0; i < uniform.numel(); ++i) uniform.set(i, 0.5);
  const Tensor labels = Tensor::from_values<int64_t>(Shape{2, 3}, {1, 2, 3, 2, 3, -100});
  QualitySettings words;
  words.word_starts = {false, true, false, true};
  EXPECT_NEAR(measure("word_perplexity", uniform, labels, -1, words), std::pow(4.0, 5.0 / 4), 1e-9);
  EXPECT_NEAR(measure("perplexity", uniform, labels, -1, words), 4.0, 1e-9);
  // Every piece a word: the two agree.
  words.word_starts = {true, true, true, true};
  EXPECT_NEAR(measure("word_perplexity", uniform, labels, -1, words), 4.0, 1e-9);
  // Without word starts, or with a vocabulary of another size, it refuses.
  EXPECT_THROW(measure("word_perplexity", uniform, labels), InvalidArgument);
  words.word_starts = {true, false, true};
  EXPECT_THROW(measure("word_perplexity", uniform, labels, -1, words), InvalidArgument);
}

TEST(QualityMeasures, RegressionErrors) {
  const Tensor p = Tensor::from_values<float>(Shape{2, 2}, {1, 2, 3, 4});
  const Tensor t = Tensor::from_values<float>(Shape{2, 2}, {1, 0, 3, 8});  // differences 0, 2, 0, -4
  EXPECT_DOUBLE_EQ(measure("mse", p, t), 20.0 / 4);
  EXPECT_DOUBLE_EQ(measure("mae", p, t), 6.0 / 4);
  EXPECT_DOUBLE_EQ(measure("mse", p, t, 1), 4.0 / 2);
  EXPECT_DOUBLE_EQ(measure("mae", p, t, 1), 2.0 / 2);
  EXPECT_THROW(measure("mse", p, Tensor::from_values<float>(Shape{4}, {1, 0, 3, 8})), InvalidArgument);
  EXPECT_THROW(measure("mse", p, Tensor::from_values<int64_t>(Shape{2, 2}, {1, 0, 3, 8})), InvalidArgument);
}

// Greedy CTC decoding, blank 0: row 0's best classes per step 1 1 0 2 2 decode to (1, 2), row 1's
// 0 1 0 1 2 to (1, 1, 2): a label repeated across a blank counts twice.
const Tensor kCtcScores = Tensor::from_values<float>(Shape{2, 5, 3}, {0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1,  //
                                                                      1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1});

TEST(QualityMeasures, CerIsTheEditDistanceOfGreedyCtcDecodingOverTheLabels) {
  // Row 0 (1, 2) against (1, 2): no edit; row 1 (1, 1, 2) against (2, 1, 2): one substitution.
  const Tensor labels = Tensor::from_values<int64_t>(Shape{2, 3}, {1, 2, -100, 2, 1, 2});
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, labels), (0.0 + 1.0) / (2 + 3));
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, labels, 1), 0.0);
  // (1, 1, 2) against (1, 2): one deletion; against (2): two deletions.
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 3}, {1, 2, -100, 1, 2, -100})),
                   1.0 / 4);
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 3}, {1, 2, -100, -100, 2, -100})),
                   2.0 / 3);
  // Extra decoded labels can take the rate above 1: (1, 2) and (1, 1, 2) against (1) each are one
  // and two edits over one label.
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 1}, {1, 1})), 3.0 / 2);
  // With class 2 as the blank, row 0 decodes to (1, 0).
  EXPECT_DOUBLE_EQ(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 2}, {1, 0, 1, 0}), 1, {-100, 2}),
                   0.0);
  EXPECT_THROW(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 1}, {0, 1})), InvalidArgument);
  EXPECT_THROW(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 1}, {3, 1})), InvalidArgument);
  EXPECT_THROW(measure("cer", kScores, kLabels), InvalidArgument);  // not [N, T, C]
  EXPECT_THROW(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2}, {1, 1})), InvalidArgument);
  EXPECT_THROW(measure("cer", kCtcScores, Tensor::from_values<int64_t>(Shape{2, 1}, {1, 1}), -1, {-100, 3}),
               InvalidArgument);  // no class 3 to be the blank
}

TEST(QualityMeasures, RefuseWhatTheyCannotRead) {
  EXPECT_THROW(measure("accuracy", kScores, Tensor::from_values<int64_t>(Shape{4}, {0, 3, 0, 0})), InvalidArgument);
  EXPECT_THROW(measure("accuracy", kScores, Tensor::from_values<float>(Shape{4}, {0, 1, 0, 0})), InvalidArgument);
  EXPECT_THROW(measure("accuracy", kScores, Tensor::from_values<int64_t>(Shape{2, 2}, {0, 1, 0, 0})),
               InvalidArgument);
  EXPECT_THROW(measure("accuracy", kScores, kLabels, 5), InvalidArgument);  // more rows than the batch
  EXPECT_THROW(measure("perplexity", Tensor::from_values<float>(Shape{3}, {1, 2, 3}), kLabels), InvalidArgument);
  for (const char* bad : {"top0", "top", "topx", "top-1", "Accuracy", "BLEU", ""})
    EXPECT_THROW(make_quality_measure(bad), InvalidArgument) << bad;
  try {
    make_quality_measure("wer");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "known: accuracy, top<k>, exact_match, perplexity, word_perplexity, mse, mae, cer, bleu"),
              std::string::npos)
        << e.what();
  }
}

TEST(QualityTargets, ParseCompareAndPrint) {
  using C = QualityTarget::Comparison;
  const QualityTarget a = parse_quality_target("accuracy>=0.97");
  EXPECT_EQ(a.measure, "accuracy");
  EXPECT_EQ(a.comparison, C::at_least);
  EXPECT_DOUBLE_EQ(a.threshold, 0.97);
  EXPECT_TRUE(a.met_by(0.97));
  EXPECT_FALSE(a.met_by(0.9699));
  EXPECT_FALSE(a.met_by(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_EQ(a.to_string(), "accuracy>=0.97");
  const QualityTarget p = parse_quality_target(" perplexity < 40 ");
  EXPECT_EQ(p.measure, "perplexity");
  EXPECT_EQ(p.comparison, C::below);
  EXPECT_TRUE(p.met_by(39.9));
  EXPECT_FALSE(p.met_by(40));
  EXPECT_EQ(parse_quality_target(p.to_string()).to_string(), "perplexity<40");
  EXPECT_EQ(parse_quality_target("top5>0.5").comparison, C::above);
  EXPECT_FALSE(parse_quality_target("top5>0.5").met_by(0.5));
  EXPECT_EQ(parse_quality_target("mse<=1e-3").comparison, C::at_most);
  EXPECT_TRUE(parse_quality_target("mse<=1e-3").met_by(0.001));
  EXPECT_EQ(accuracy_target(0.5).to_string(), "accuracy>=0.5");
  EXPECT_THROW(accuracy_target(0), InvalidArgument);
  EXPECT_THROW(accuracy_target(1.2), InvalidArgument);
}

TEST(QualityTargets, RefuseTargetsThatCannotMeanWhatTheySay) {
  const auto message = [](const std::string& text) {
    try {
      parse_quality_target(text);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("perplexity>=40").find("perplexity is better when lower; write perplexity<=40"),
            std::string::npos)
      << message("perplexity>=40");
  EXPECT_NE(message("accuracy<0.5").find("better when higher"), std::string::npos);
  EXPECT_NE(message("accuracy>=1.5").find("can never be met"), std::string::npos);
  EXPECT_NE(message("accuracy>1").find("can never be met"), std::string::npos);
  EXPECT_NE(message("mse<0").find("can never be met"), std::string::npos);
  EXPECT_NE(message("perplexity<=0.5").find("can never be met"), std::string::npos);
  EXPECT_NE(message("accuracy").find("has no comparison"), std::string::npos);
  EXPECT_NE(message(">=0.5").find("names no measure"), std::string::npos);
  EXPECT_NE(message("accuracy>=high").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("accuracy>=nan").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("accuracy>=0.5x").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("accuracy=>0.5").find("unknown quality measure 'accuracy='"), std::string::npos);
  EXPECT_NE(message("map90>=0.8").find("unknown quality measure 'map90'"), std::string::npos);
  EXPECT_EQ(message("map50>=0.8"), "(accepted)");
  EXPECT_NE(message("map>=1.5").find("can never be met"), std::string::npos);
  EXPECT_EQ(message("accuracy>=1"), "(accepted)");
  EXPECT_EQ(message("perplexity<=1"), "(accepted)");
  EXPECT_EQ(message("cer<=0.1"), "(accepted)");
  EXPECT_NE(message("cer>=0.9").find("better when lower"), std::string::npos);
}

}  // namespace
}  // namespace d5
