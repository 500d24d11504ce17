// Loss heads against losses computed here in double from their formulas, and training beyond
// classification: a token classifier with padding (sequence-ce, perplexity) and a regressor (mse)
// trained to quality targets on the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "deep500/backends/builtin.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/loss_head.h"
#include "deep500/train/trainer.h"
#include "train_fixtures.h"

namespace d5 {
namespace {

constexpr int64_t kPositions = 5, kTokenFeatures = 4, kTokenClasses = 3;

Tensor random_tensor(const Shape& shape, RngStream& rng, double scale) {
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = static_cast<float>(scale * rng.normal());
  return t;
}

// input [B, T, F] -> MatMul W [F, C] -> Add b [C] -> "logits" [B, T, C]: a classifier per position.
Network token_classifier(int64_t batch, uint64_t seed) {
  Network net("tokens");
  RngStream rng(seed, "token-classifier");
  net.add_input(kZooInput, TensorDesc{DType::f32, Shape{batch, kPositions, kTokenFeatures}});
  net.feed_tensor("W", random_tensor(Shape{kTokenFeatures, kTokenClasses}, rng, 0.1), true);
  net.feed_tensor("b", random_tensor(Shape{kTokenClasses}, rng, 0.1), true);
  net.add_node({"mm", "MatMul", "", {}, {kZooInput, "W"}, {"h"}});
  net.add_node({"add", "Add", "", {}, {"h", "b"}, {kZooLogits}});
  net.add_output(kZooLogits);
  return net;
}

// The batch of rows `indices` of in-memory samples: features [size, ...sample] and integer
// labels [size, labels_per_sample].
Batch fetch_rows(std::span<const int64_t> indices, const std::vector<float>& features, const Shape& sample,
                 const std::vector<int64_t>& labels, int64_t labels_per_sample) {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t per_sample = sample.numel();
  std::vector<int64_t> dims{n};
  for (int64_t d : sample.dims()) dims.push_back(d);
  Tensor x(DType::f32, Shape(dims));
  Tensor y(DType::i64, Shape{n, labels_per_sample});
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    std::copy_n(features.begin() + i * per_sample, per_sample, x.data_as<float>() + r * per_sample);
    std::copy_n(labels.begin() + i * labels_per_sample, labels_per_sample, y.data_as<int64_t>() + r * labels_per_sample);
  }
  return {{kDataInput, x}, {kDataLabels, y}};
}

// Sequences of kPositions tokens of kTokenClasses classes, each token's features a noisy one-hot
// of its class; sample i has 2 + i % 4 real tokens, the rest padding (label -100, zero features).
class TokenSet : public Dataset {
 public:
  TokenSet(int64_t size, uint64_t seed) : size_(size) {
    RngStream rng(seed, "tokens");
    for (int64_t i = 0; i < size * kPositions; ++i) {
      const int64_t sample = i / kPositions, pos = i % kPositions;
      const bool real = pos < 2 + sample % 4;
      const auto label = static_cast<int64_t>(rng.below(kTokenClasses));
      labels_.push_back(real ? label : kDefaultIgnoreIndex);
      for (int64_t f = 0; f < kTokenFeatures; ++f)
        features_.push_back(real ? static_cast<float>((f == label ? 2.0 : 0.0) + 0.3 * rng.normal()) : 0.f);
    }
  }
  std::string name() const override { return "tokens"; }
  int64_t size() const override { return size_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{kPositions, kTokenFeatures}}},
            {kDataLabels, TensorDesc{DType::i64, Shape{kPositions}}}};
  }
  int64_t classes() const override { return kTokenClasses; }
  Batch fetch(std::span<const int64_t> indices) const override {
    return fetch_rows(indices, features_, Shape{kPositions, kTokenFeatures}, labels_, kPositions);
  }

 private:
  int64_t size_;
  std::vector<float> features_;
  std::vector<int64_t> labels_;
};

// y = x . (1, -2, 0.5) + 0.25: a regression a linear network fits exactly.
class LineSet : public Dataset {
 public:
  LineSet(int64_t size, uint64_t seed) : size_(size) {
    RngStream rng(seed, "line");
    for (int64_t i = 0; i < size * 3; ++i) x_.push_back(static_cast<float>(rng.normal()));
  }
  std::string name() const override { return "line"; }
  int64_t size() const override { return size_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{3}}}, {kDataLabels, TensorDesc{DType::f32, Shape{1}}}};
  }
  int64_t classes() const override { return 0; }
  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor x(DType::f32, Shape{n, 3});
    Tensor y(DType::f32, Shape{n, 1});
    for (int64_t r = 0; r < n; ++r) {
      const float* in = x_.data() + indices[static_cast<size_t>(r)] * 3;
      std::copy_n(in, 3, x.data_as<float>() + r * 3);
      y.data_as<float>()[r] = in[0] - 2 * in[1] + 0.5f * in[2] + 0.25f;
    }
    return {{kDataInput, x}, {kDataLabels, y}};
  }

 private:
  int64_t size_;
  std::vector<float> x_;
};

Network regressor(int64_t batch) {
  Network net("line");
  net.add_input(kZooInput, TensorDesc{DType::f32, Shape{batch, 3}});
  net.feed_tensor("W", Tensor(DType::f32, Shape{3, 1}), true);  // zeros
  net.feed_tensor("b", Tensor(DType::f32, Shape{1}), true);
  net.add_node({"mm", "MatMul", "", {}, {kZooInput, "W"}, {"h"}});
  net.add_node({"add", "Add", "", {}, {"h", "b"}, {kZooLogits}});
  net.add_output(kZooLogits);
  return net;
}

constexpr int64_t kFrames = 8, kFrameFeatures = 3, kMaxLabels = 3;

// Frame sequences for CTC: 1 to 3 labels from {1, 2}, each spoken for one frame and followed by a
// silent (blank, class 0) frame, the rest silence; a frame's features are a noisy one-hot of its
// class. Labels [3], left-aligned, padded with -100.
class FrameSet : public Dataset {
 public:
  FrameSet(int64_t size, uint64_t seed) : size_(size) {
    RngStream rng(seed, "frames");
    for (int64_t i = 0; i < size; ++i) {
      const auto count = 1 + static_cast<int64_t>(rng.below(kMaxLabels));
      std::vector<int64_t> frames(kFrames, 0);
      for (int64_t l = 0; l < kMaxLabels; ++l) {
        const int64_t label = l < count ? 1 + static_cast<int64_t>(rng.below(2)) : kDefaultIgnoreIndex;
        labels_.push_back(label);
        if (l < count) frames[static_cast<size_t>(2 * l)] = label;
      }
      for (int64_t t = 0; t < kFrames; ++t)
        for (int64_t f = 0; f < kFrameFeatures; ++f)
          features_.push_back(static_cast<float>((f == frames[static_cast<size_t>(t)] ? 2.0 : 0.0) + 0.3 * rng.normal()));
    }
  }
  std::string name() const override { return "frames"; }
  int64_t size() const override { return size_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{kFrames, kFrameFeatures}}},
            {kDataLabels, TensorDesc{DType::i64, Shape{kMaxLabels}}}};
  }
  int64_t classes() const override { return 3; }
  Batch fetch(std::span<const int64_t> indices) const override {
    return fetch_rows(indices, features_, Shape{kFrames, kFrameFeatures}, labels_, kMaxLabels);
  }

 private:
  int64_t size_;
  std::vector<float> features_;
  std::vector<int64_t> labels_;
};

// input [B, T, F] -> MatMul W [F, 3] -> Add b -> "logits" [B, T, 3]: a classifier per frame.
Network frame_classifier(int64_t batch, uint64_t seed) {
  Network net("frames");
  RngStream rng(seed, "frame-classifier");
  net.add_input(kZooInput, TensorDesc{DType::f32, Shape{batch, kFrames, kFrameFeatures}});
  net.feed_tensor("W", random_tensor(Shape{kFrameFeatures, 3}, rng, 0.1), true);
  net.feed_tensor("b", Tensor(DType::f32, Shape{3}), true);
  net.add_node({"mm", "MatMul", "", {}, {kZooInput, "W"}, {"h"}});
  net.add_node({"add", "Add", "", {}, {"h", "b"}, {kZooLogits}});
  net.add_output(kZooLogits);
  return net;
}

TensorMap feeds(const Batch& b) { return {{kZooInput, b.at(kDataInput)}, {kZooLabels, b.at(kDataLabels)}}; }

class LossHeadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

// sequence-ce averages -log softmax(logits)[label] over the labelled positions only.
TEST_F(LossHeadTest, SequenceCrossEntropyAveragesOverLabelledPositions) {
  Network net = token_classifier(4, 11);
  const LossHead head = append_loss_head(net, "sequence-ce");
  EXPECT_EQ(head.logits, kZooLogits);
  EXPECT_EQ(head.quality, (std::vector<std::string>{"accuracy", "perplexity"}));
  const TokenSet data(4, 3);
  const Batch b = data.fetch(std::vector<int64_t>{0, 1, 2, 3});
  auto ex = make_executor(net, "reference");
  const TensorMap out = ex->inference(feeds(b));
  const Tensor& logits = out.at(kZooLogits);
  const Tensor& labels = b.at(kDataLabels);
  double nll = 0;
  int64_t counted = 0;
  for (int64_t p = 0; p < labels.numel(); ++p) {
    const auto label = static_cast<int64_t>(labels.get(p));
    if (label == kDefaultIgnoreIndex) continue;
    double sum = 0;
    for (int64_t c = 0; c < kTokenClasses; ++c) sum += std::exp(logits.get(p * kTokenClasses + c));
    nll += std::log(sum) - logits.get(p * kTokenClasses + label);
    ++counted;
  }
  EXPECT_EQ(counted, 2 + 3 + 4 + 5);  // samples 0..3 hold 2..5 real tokens
  // f32 softmax and sums of 14 terms: a few ulps of the loss.
  EXPECT_NEAR(out.at(kZooLoss).get(0), nll / static_cast<double>(counted), 1e-6 * nll / static_cast<double>(counted));
  // The perplexity measure over the same batch is exp of that loss.
  auto ppl = make_quality_measure("perplexity");
  ppl->reset();
  ppl->observe(logits, labels, 4);
  EXPECT_NEAR(ppl->value(), std::exp(out.at(kZooLoss).get(0)), 1e-5 * ppl->value());
}

TEST_F(LossHeadTest, MseIsTheMeanSquaredDifference) {
  Network net = regressor(2);
  net.feed_tensor("W", Tensor::from_values<float>(Shape{3, 1}, {1, 1, 1}));
  const LossHead head = append_loss_head(net, "mse");
  EXPECT_EQ(head.quality, std::vector<std::string>{"mse"});
  const TensorMap out = make_executor(net, "reference")
                            ->inference({{kZooInput, Tensor::from_values<float>(Shape{2, 3}, {1, 2, 3, 0, 0, 1})},
                                         {kZooLabels, Tensor::from_values<float>(Shape{2, 1}, {4, 3})}});
  // predictions 6 and 1 against 4 and 3: (4 + 4) / 2.
  EXPECT_DOUBLE_EQ(out.at(kZooLoss).get(0), 4.0);
}

// Uniform scores over blank and one label for two steps: a target (1) has the alignments 1 1, b 1
// and 1 b of probability 1/4 each, so loss ln(4/3); an empty target only b b, loss ln 4. "mean"
// divides each by its target length (at least 1) and averages over the batch.
TEST_F(LossHeadTest, CtcCountsTargetLengthsFromThePaddingAndAveragesPerLabel) {
  Network net("scores");
  net.add_input(kZooInput, TensorDesc{DType::f32, Shape{2, 2, 2}});
  net.add_node({"id", "Identity", "", {}, {kZooInput}, {kZooLogits}});
  net.add_output(kZooLogits);
  LossHeadOptions o;
  o.label_shape = {2};
  const LossHead head = append_loss_head(net, "ctc", o);
  EXPECT_EQ(head.quality, std::vector<std::string>{"cer"});
  auto ex = make_executor(net, "reference");
  const Tensor zeros(DType::f32, Shape{2, 2, 2});
  const TensorMap out =
      ex->inference({{kZooInput, zeros}, {kZooLabels, Tensor::from_values<int64_t>(Shape{2, 2}, {1, -100, -100, -100})}});
  EXPECT_NEAR(out.at(kZooLoss).get(0), (std::log(4.0 / 3) + std::log(4.0)) / 2, 1e-6);
  // A target of two labels cannot fit two steps with a blank between repeats: zero_infinity.
  const TensorMap repeat =
      ex->inference({{kZooInput, zeros}, {kZooLabels, Tensor::from_values<int64_t>(Shape{2, 2}, {1, 1, 1, -100})}});
  EXPECT_NEAR(repeat.at(kZooLoss).get(0), (0 + std::log(4.0 / 3)) / 2, 1e-6);
  Network again("scores");
  again.add_input(kZooInput, TensorDesc{DType::f32, Shape{2, 2, 2}});
  again.add_node({"id", "Identity", "", {}, {kZooInput}, {kZooLogits}});
  again.add_output(kZooLogits);
  EXPECT_THROW(append_loss_head(again, "ctc"), InvalidArgument);  // no label length
  o.blank = 2;
  EXPECT_THROW(append_loss_head(again, "ctc", o), InvalidArgument);  // no class 2
}

TEST_F(LossHeadTest, TrainsAFrameClassifierWithCtcToACerTarget) {
  Network net = frame_classifier(8, 3);
  LossHeadOptions ho;
  ho.label_shape = {kMaxLabels};
  const LossHead head = append_loss_head(net, "ctc", ho);
  auto ex = make_executor(net, "reference");
  const FrameSet train(64, 1), test(20, 2);
  test::PlainSgd sgd(0.5);
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 100;
  o.test_every_steps = 4;
  o.quality = head.quality;
  o.target = parse_quality_target("cer<=0.05");
  const TrainingResult r = test_training(*ex, train, &test, sgd, sampler, o);
  ASSERT_TRUE(r.reached_target) << "final cer " << r.final_test("cer");
  const auto& cer = r.test_curve("cer");
  EXPECT_GT(cer.front().value, 0.05);
  EXPECT_LE(cer.back().value, 0.05);
  EXPECT_LT(r.loss.back().value, r.loss.front().value);
}

// The ssd head on a zoo detector built without its loss gives the loss the detector's own
// (with_loss) gives on the same feeds: the same SsdLoss on the same anchors; it reads a second
// input, the boxes, and needs the anchors.
TEST_F(LossHeadTest, SsdHeadEqualsTheDetectorsOwnLoss) {
  ModelOptions mo;
  mo.batch = 2;
  Network bare = build_model("detector-ssd", mo);
  LossHeadOptions ho;
  ho.label_shape = {kZooDetectionObjects};
  const LossHead head = append_loss_head(bare, "ssd", ho);
  EXPECT_EQ(head.quality, (std::vector<std::string>{"map50", "map"}));
  EXPECT_EQ(bare.inputs(), (std::vector<std::string>{kZooInput, kZooLabels, kZooBoxes}));
  mo.with_loss = true;
  Network own = build_model("detector-ssd", mo);

  RngStream rng(7, "ssd-head");
  const Tensor image = random_tensor(Shape{2, 1, 64, 64}, rng, 1.0);
  Tensor boxes(DType::f32, Shape{2, kZooDetectionObjects, 4});
  boxes.fill(0);
  const std::vector<float> objects = {4, 6, 14, 24, 30, 30, 50, 48, 8, 40, 20, 60};  // two in image 0, one in 1
  for (size_t i = 0; i < 8; ++i) boxes.data_as<float>()[i] = objects[i];
  for (size_t i = 0; i < 4; ++i) boxes.data_as<float>()[20 + i] = objects[8 + i];
  const Tensor labels =
      Tensor::from_values<int64_t>(Shape{2, 5}, {3, 7, -100, -100, -100, 1, -100, -100, -100, -100});
  const TensorMap feeds = {{kZooInput, image}, {kZooLabels, labels}, {kZooBoxes, boxes}};
  const double a = make_executor(bare, "reference")->inference(feeds).at(kZooLoss).get(0);
  const double b = make_executor(own, "reference")->inference(feeds).at(kZooLoss).get(0);
  EXPECT_GT(a, 0);
  EXPECT_EQ(a, b);

  Network plain = token_classifier(2, 1);  // [B, T, C] but no anchors
  EXPECT_THROW(append_loss_head(plain, "ssd", ho), InvalidArgument);
  Network no_count = build_model("detector-ssd", ModelOptions{});
  EXPECT_THROW(append_loss_head(no_count, "ssd"), InvalidArgument);  // objects per image unknown
}

TEST_F(LossHeadTest, RefuseNetworksTheyCannotRead) {
  Network tokens = token_classifier(2, 1);
  EXPECT_THROW(append_loss_head(tokens, "softmax-ce"), InvalidArgument);  // [B, T, C] is not [B, C]
  EXPECT_THROW(append_loss_head(tokens, "ctc"), InvalidArgument);
  Network line = regressor(2);
  EXPECT_THROW(append_loss_head(line, "sequence-ce"), InvalidArgument);
  Network named = regressor(2);
  EXPECT_THROW(append_loss_head(named, "mse", LossHeadOptions{"W", "loss"}), InvalidArgument);  // W is taken
  append_loss_head(line, "mse");
  EXPECT_THROW(append_loss_head(line, "mse", LossHeadOptions{"y", "l2"}), InvalidArgument);  // two outputs now
}

TEST_F(LossHeadTest, TrainsATokenClassifierToAPerplexityTarget) {
  Network net = token_classifier(8, 5);
  append_loss_head(net, "sequence-ce");
  auto ex = make_executor(net, "reference");
  const TokenSet train(64, 1), test(20, 2);  // 20 = 2 full test batches and a padded one of 4
  test::PlainSgd sgd(0.5);
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 60;
  o.test_every_steps = 2;  // a curve that starts near the untrained perplexity of 3
  o.quality = {"accuracy", "perplexity", "exact_match"};
  o.target = parse_quality_target("perplexity<=1.3");
  const TrainingResult r = test_training(*ex, train, &test, sgd, sampler, o);
  ASSERT_TRUE(r.reached_target) << "final perplexity " << r.final_test("perplexity");
  EXPECT_EQ(r.stop_reason, StopReason::target);
  const auto& ppl = r.test_curve("perplexity");
  ASSERT_GE(ppl.size(), 2u);
  EXPECT_GT(ppl.front().value, 1.3);  // about 3 (uniform over 3 classes) at first
  EXPECT_LE(ppl.back().value, 1.3);
  EXPECT_GT(r.final_test("accuracy"), 0.9);
  EXPECT_EQ(r.test_curve("exact_match").size(), ppl.size());
  EXPECT_FALSE(r.train_accuracy.empty());  // token accuracy of the training batches

  // The trainer's test pass over padded batches equals one pass over the whole set at once.
  Network whole = token_classifier(20, 5);
  for (const std::string& p : net.get_params()) whole.feed_tensor(p, net.fetch_tensor(p), true);
  const LossHead wh = append_loss_head(whole, "sequence-ce");
  std::vector<int64_t> all(20);
  std::iota(all.begin(), all.end(), 0);
  const Batch b = test.fetch(all);
  const TensorMap out = make_executor(whole, "reference")->inference(feeds(b));
  EXPECT_NEAR(r.final_test("perplexity"), std::exp(out.at(wh.loss).get(0)), 1e-5);

  const CaseResult c = training_case("tokens", "reference", o, r);
  EXPECT_EQ(c.state, CaseState::Passed);
  EXPECT_EQ(c.extra["target"], "perplexity<=1.3");
  EXPECT_EQ(c.extra["time_to_target"]["step"].get<int64_t>(), r.target_step);
  EXPECT_DOUBLE_EQ(c.extra["final_test_perplexity"].get<double>(), r.final_test("perplexity"));
  for (const char* m : {"test_accuracy", "test_perplexity", "test_exact_match", "time_to_target"}) {
    EXPECT_TRUE(std::any_of(c.metrics.begin(), c.metrics.end(), [&](const MetricRecord& x) { return x.name == m; }))
        << m;
  }
  EXPECT_EQ(c.extra["curves"]["test_perplexity"].size(), ppl.size());
}

TEST_F(LossHeadTest, TrainsARegressorToAnMseTargetWithoutAccuracy) {
  Network net = regressor(8);
  const LossHead head = append_loss_head(net, "mse");
  auto ex = make_executor(net, "reference");
  const LineSet train(64, 1), test(16, 2);
  test::PlainSgd sgd(0.1);
  test::InOrderSampler sampler(train.size(), 8);
  TrainingOptions o;
  o.epochs = 100;
  o.quality = head.quality;
  o.target = parse_quality_target("mse<=1e-4");
  const TrainingResult r = test_training(*ex, train, &test, sgd, sampler, o);
  ASSERT_TRUE(r.reached_target) << "final mse " << r.final_test("mse");
  EXPECT_LE(r.final_test("mse"), 1e-4);
  EXPECT_TRUE(r.train_accuracy.empty());  // no accuracy of a regression
  EXPECT_TRUE(r.test_curve("accuracy").empty());
  EXPECT_NEAR(net.fetch_tensor("W").get(1), -2.0, 0.05);
}

TEST_F(LossHeadTest, TheTrainerRefusesLabelsTheHeadCannotRead) {
  Network net = regressor(8);
  append_loss_head(net, "mse");
  auto ex = make_executor(net, "reference");
  const test::LearnableSet classes(16, 1);  // i64 class labels, not f32 targets
  test::PlainSgd sgd(0.1);
  test::InOrderSampler sampler(classes.size(), 8);
  TrainingOptions o;
  o.epochs = 1;
  o.quality = {"mse"};
  try {
    Trainer t(*ex, classes, nullptr, sgd, sampler, o);
    FAIL() << "accepted i64 class labels for an mse head";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("pick the loss head that reads these labels"), std::string::npos) << e.what();
  }
  // A measure the trainer does not know fails before the first step, as does a repeated one.
  Network tokens = token_classifier(8, 1);
  append_loss_head(tokens, "sequence-ce");
  auto tex = make_executor(tokens, "reference");
  const TokenSet data(16, 1);
  test::InOrderSampler ts(data.size(), 8);
  o.quality = {"accuracy", "wer"};
  EXPECT_THROW(Trainer(*tex, data, &data, sgd, ts, o), InvalidArgument);
  // BLEU needs sequences that end with an end token, which a token classifier's set has not.
  o.quality = {"accuracy", "bleu"};
  try {
    Trainer(*tex, data, &data, sgd, ts, o);
    FAIL() << "accepted bleu without an end token";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bleu needs a test set of target sequences"), std::string::npos) << e.what();
  }
  o.quality = {"accuracy", "accuracy"};
  EXPECT_THROW(Trainer(*tex, data, &data, sgd, ts, o), InvalidArgument);
  o.quality = {"perplexity"};
  o.target = parse_quality_target("accuracy>=0.5");  // joins the measures
  Trainer ok(*tex, data, &data, sgd, ts, o);
  EXPECT_EQ(ok.test_quality().size(), 2u);
}

}  // namespace
}  // namespace d5
