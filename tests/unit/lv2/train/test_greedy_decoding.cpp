// Unit: a sequence-to-sequence network's test pass decodes greedily (trainer.h). The oracle
// decodes one position at a time, filling every position after the prefix with random ids, so it
// also catches a decoder that could see ahead; the trainer's measures must then find the oracle's
// sequences exactly, and one changed label must cost exactly that row.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "deep500/backends/builtin.h"
#include "deep500/core/rng.h"
#include "deep500/net/graph_executor.h"
#include "deep500/train/trainer.h"
#include "train_fixtures.h"

namespace d5 {
namespace {

constexpr int64_t kRows = 4, kSource = 5, kTarget = 6, kVocabulary = 40, kStart = 39;

// Fixed sources and label sequences; the decoder input is the start token and zeros, never the
// labels shifted, so a test pass that did not decode would score other inputs.
class Translations : public Dataset {
 public:
  Translations(std::vector<int64_t> sources, std::vector<int64_t> labels, int64_t end)
      : sources_(std::move(sources)), labels_(std::move(labels)), end_(end) {}
  std::string name() const override { return "translations"; }
  int64_t size() const override { return kRows; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, {DType::i64, Shape{kSource}}},
            {kDataDecoderInput, {DType::i64, Shape{kTarget}}},
            {kDataLabels, {DType::i64, Shape{kTarget}}}};
  }
  int64_t classes() const override { return kVocabulary; }
  int64_t vocabulary() const override { return kVocabulary; }
  int64_t end_token() const override { return end_; }
  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor src(DType::i64, Shape{n, kSource}), dec(DType::i64, Shape{n, kTarget}), lab(DType::i64, Shape{n, kTarget});
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = indices[static_cast<size_t>(r)];
      for (int64_t t = 0; t < kSource; ++t) src.set(r * kSource + t, static_cast<double>(sources_[i * kSource + t]));
      for (int64_t t = 0; t < kTarget; ++t) {
        dec.set(r * kTarget + t, t == 0 ? kStart : 0);
        lab.set(r * kTarget + t, static_cast<double>(labels_[i * kTarget + t]));
      }
    }
    return {{kDataInput, src}, {kDataDecoderInput, dec}, {kDataLabels, lab}};
  }

 private:
  std::vector<int64_t> sources_, labels_;
  int64_t end_;
};

Tensor ids(const std::vector<int64_t>& values, Shape shape) {
  Tensor t(DType::i64, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return t;
}

class GreedyDecodingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

// The zoo's translation model at this test's sizes, with its loss.
Network translation_model(bool training) {
  ModelOptions o;
  o.batch = kRows;
  o.vocabulary = o.classes = kVocabulary;
  o.input_shape = {kSource};
  o.target_length = kTarget;
  o.with_loss = true;
  o.training = training;
  return build_model("seq2seq-transformer", o);
}

TEST_F(GreedyDecodingTest, TestPassFindsTheStepByStepDecodersSequences) {
  Network net = translation_model(false);
  auto ex = make_executor(net, "reference");

  RngStream rng(7, "greedy-test");
  std::vector<int64_t> sources(kRows * kSource);
  for (auto& s : sources) s = static_cast<int64_t>(rng.below(kVocabulary - 1));
  // The oracle: position t is decoded from the prefix so far, later positions random.
  std::vector<int64_t> decoded(kRows * kTarget);
  std::vector<int64_t> prefix(kRows * kTarget);
  for (int64_t r = 0; r < kRows; ++r) prefix[r * kTarget] = kStart;
  for (int64_t t = 0; t < kTarget; ++t) {
    std::vector<int64_t> dec = prefix;
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t u = t + 1; u < kTarget; ++u) dec[r * kTarget + u] = static_cast<int64_t>(rng.below(kVocabulary));
    const TensorMap out = ex->inference({{kDataInput, ids(sources, Shape{kRows, kSource})},
                                         {kDataDecoderInput, ids(dec, Shape{kRows, kTarget})},
                                         {kDataLabels, ids(std::vector<int64_t>(kRows * kTarget, 0), Shape{kRows, kTarget})}});
    const float* x = out.at(kZooLogits).data_as<float>();
    for (int64_t r = 0; r < kRows; ++r) {
      const float* at = x + (r * kTarget + t) * kVocabulary;
      const auto best = std::max_element(at, at + kVocabulary) - at;
      decoded[r * kTarget + t] = best;
      if (t + 1 < kTarget) prefix[r * kTarget + t + 1] = best;
    }
  }
  // An end token the decoder never produced, so every sequence is scored whole.
  std::set<int64_t> seen(decoded.begin(), decoded.end());
  int64_t end = 0;
  while (seen.count(end)) ++end;
  ASSERT_LT(end, kVocabulary);

  test::PlainSgd sgd(0.1);
  test::InOrderSampler sampler(kRows, kRows);
  TrainingOptions to;
  to.quality = {"exact_match", "bleu", "accuracy"};
  Translations right(sources, decoded, end);
  Trainer trainer(*ex, right, &right, sgd, sampler, to);
  auto q = trainer.test_quality();
  EXPECT_EQ(q.at("exact_match"), 1.0);
  EXPECT_DOUBLE_EQ(q.at("bleu"), 100.0);
  EXPECT_EQ(q.at("accuracy"), 1.0);

  // One label changed in one row: that row is no longer an exact match, one position of 24 wrong.
  std::vector<int64_t> off = decoded;
  int64_t& changed = off[kTarget + 2];
  do changed = (changed + 1) % kVocabulary;
  while (changed == end);
  Translations wrong(sources, off, end);
  Trainer second(*ex, wrong, &wrong, sgd, sampler, to);
  q = second.test_quality();
  EXPECT_EQ(q.at("exact_match"), 0.75);
  EXPECT_DOUBLE_EQ(q.at("accuracy"), 23.0 / 24.0);
  EXPECT_LT(q.at("bleu"), 100.0);
}

// A network built for training drops units; its test passes must not: after a step, the trainer
// measures what the same network built for inference measures with the trained parameters, and
// twice the same. (With Dropout active the perplexity would move with every pass's masks.)
TEST_F(GreedyDecodingTest, TestPassesLeaveDropoutOutAndReadTheTrainedParameters) {
  Network train_net = translation_model(true);
  ASSERT_TRUE(std::any_of(train_net.nodes().begin(), train_net.nodes().end(),
                          [](const Node& n) { return n.op_type == "Dropout"; }));
  Network eval_net = translation_model(false);
  auto train_ex = make_executor(train_net, "reference");
  auto eval_ex = make_executor(eval_net, "reference");

  RngStream rng(3, "dropout-test");
  std::vector<int64_t> sources(kRows * kSource), labels(kRows * kTarget);
  for (auto& v : sources) v = static_cast<int64_t>(rng.below(kVocabulary - 1));
  for (auto& v : labels) v = static_cast<int64_t>(rng.below(kVocabulary - 1));
  Translations data(sources, labels, kVocabulary - 1);
  test::PlainSgd sgd(0.05);
  test::InOrderSampler sampler(kRows, kRows);
  TrainingOptions to;
  to.quality = {"perplexity", "exact_match"};
  to.epochs = 2;
  to.test_every_epochs = 1;
  Trainer trainer(*train_ex, data, &data, sgd, sampler, to);
  trainer.train();
  for (const std::string& p : train_net.get_params()) eval_net.fetch_tensor(p).copy_from(train_net.fetch_tensor(p));
  Trainer evaluator(*eval_ex, data, &data, sgd, sampler, to);
  const auto want = evaluator.test_quality();
  const auto got = trainer.test_quality();
  EXPECT_EQ(got.at("perplexity"), want.at("perplexity"));
  EXPECT_EQ(trainer.test_quality().at("perplexity"), got.at("perplexity"));
  EXPECT_EQ(got.at("exact_match"), want.at("exact_match"));
}

}  // namespace
}  // namespace d5
