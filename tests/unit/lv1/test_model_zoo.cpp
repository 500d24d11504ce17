// The model zoo's structure: the registry, parameter counts against the published ones, shapes,
// options (classes, input shape, loss, training mode) and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "deep500/core/error.h"
#include "deep500/net/model_zoo.h"

namespace d5 {
namespace reference {
void register_all();
}
namespace {

class ModelZooTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference::register_all(); }
};

// Structure tests skip drawing random values: counts and shapes do not depend on them.
ModelOptions structure_only(int64_t batch = 1) {
  ModelOptions o;
  o.batch = batch;
  o.initialize = false;
  return o;
}

int count_ops(const Network& net, const std::string& type) {
  return static_cast<int>(std::count_if(net.nodes().begin(), net.nodes().end(),
                                        [&](const Node& n) { return n.op_type == type; }));
}

TEST_F(ModelZooTest, RegistryHasEveryModelOnce) {
  std::set<std::string> names;
  for (const auto& m : zoo_models()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.description.empty()) << m.name;
    EXPECT_FALSE(m.default_input.empty()) << m.name;
    EXPECT_GT(m.default_classes, 0) << m.name;
  }
  const std::set<std::string> expected = {"lenet5",    "mlp",          "alexnet",  "vgg11",      "vgg16",
                                          "resnet18",  "resnet34",     "resnet50", "resnet101",  "resnet152",
                                          "resnet20",  "resnet32",     "resnet44", "resnet56",   "resnet110",
                                          "wrn-28-10", "mobilenet_v2", "lstm",     "transformer", "text-lstm",
                                          "text-lstm-lm", "text-transformer", "kws-dscnn", "speech-ctc",
                                          "seq2seq-transformer", "detector-ssd"};
  EXPECT_EQ(names, expected);
}

// A vocabulary means token ids: the text models take the dataset's, the others refuse one rather
// than be fed ids as if they were features.
TEST_F(ModelZooTest, TextModelsReadIdsOfTheirVocabularyAndOthersRefuseOne) {
  ModelOptions o;
  o.vocabulary = 500;
  o.input_shape = {12};
  o.batch = 3;
  for (const char* m : {"text-lstm", "text-lstm-lm", "text-transformer"}) {
    const Network net = build_model(m, o);
    EXPECT_EQ(net.desc(kZooInput), (TensorDesc{DType::i64, Shape{3, 12}})) << m;
    EXPECT_EQ(net.desc("embedding.weight").shape[0], 500) << m;
  }
  // The language model scores each of the 12 positions over the 500 pieces.
  EXPECT_EQ(build_model("text-lstm-lm", o).desc(kZooLogits).shape, (Shape{3, 12, 500}));
  try {
    build_model("lenet5", o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model 'lenet5' reads float features, not token ids"), std::string::npos) << m;
    EXPECT_NE(m.find("text-lstm, text-lstm-lm, text-transformer"), std::string::npos) << m;
  }
  o.input_shape = {2, 6};
  EXPECT_THROW(build_model("text-lstm", o), InvalidArgument);
}

TEST_F(ModelZooTest, UnknownModelListsTheNames) {
  try {
    build_model("resnet19");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown model 'resnet19'"), std::string::npos) << m;
    EXPECT_NE(m.find("resnet18"), std::string::npos) << m;
    EXPECT_NE(m.find("transformer"), std::string::npos) << m;
  }
}

// Published parameter counts (torchvision's model documentation for the ImageNet models; the
// CIFAR ResNets' counts follow from the architecture: e.g. ResNet-20 = stem 432 + 32 (BN) + stage
// 1: 6 x (2304 + 32) + stage 2: 4608 + 64 + 5 x (9216 + 64) + stage 3: 18432 + 128 + 5 x (36864 +
// 128) + fc 650 = 269,722; WRN-28-10's is the authors' 36.5M; LeNet-5: 156 + 2416 + 48120 + 10164 +
// 850). MLP, LSTM and Transformer are this zoo's own designs; their counts are derived in the
// comments of their builders and checked here so a change shows.
struct CountCase {
  const char* model;
  int64_t parameters;
};

class ParameterCount : public ModelZooTest, public ::testing::WithParamInterface<CountCase> {};

TEST_P(ParameterCount, MatchesThePublishedNumber) {
  const auto [model, expected] = GetParam();
  Network net = build_model(model, structure_only());
  EXPECT_EQ(net.parameter_count(), expected) << model;
  // Running statistics are constants, not parameters; every parameter is f32.
  for (const auto& p : net.get_params()) {
    EXPECT_EQ(p.find("running_"), std::string::npos) << p;
    EXPECT_EQ(net.fetch_tensor(p).dtype(), DType::f32) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ParameterCount,
                         ::testing::Values(CountCase{"lenet5", 61'706}, CountCase{"mlp", 535'818},
                                           CountCase{"alexnet", 61'100'840}, CountCase{"vgg11", 132'863'336},
                                           CountCase{"vgg16", 138'357'544}, CountCase{"resnet18", 11'689'512},
                                           CountCase{"resnet34", 21'797'672},
                                           CountCase{"resnet50", 25'557'032},
                                           CountCase{"resnet101", 44'549'160},
                                           CountCase{"resnet152", 60'192'808}, CountCase{"resnet20", 269'722},
                                           CountCase{"resnet32", 464'154}, CountCase{"resnet44", 658'586},
                                           CountCase{"resnet56", 853'018}, CountCase{"resnet110", 1'727'962},
                                           CountCase{"wrn-28-10", 36'479'194},
                                           CountCase{"mobilenet_v2", 3'504'872},
                                           // MLPerf Tiny's trainable count: conv1 10x4x64 + 64, BN 2 x 64,
                                           // 4 x (depthwise 3x3x64 + 64, BN 128, pointwise 64x64 + 64,
                                           // BN 128), fc 64 x 12 + 12: 2,752 + 4 x 5,056 + 780
                                           CountCase{"kws-dscnn", 23'756},
                                           // conv1 5x5x32 + 32 = 832, BN 64, conv2 3x3x32x32 + 32 =
                                           // 9,248, BN 64, LSTM 2 directions x (W 512 x 320 + R 512 x
                                           // 128 + B 1,024) = 460,800, fc 256 x 11 + 11 = 2,827
                                           CountCase{"speech-ctc", 473'835},
                                           CountCase{"detector-ssd", 166'632}, CountCase{"lstm", 82'186},
                                           CountCase{"transformer", 406'154},
                                           // 2,000 x 64 embedding + lstm's 99,328 + 128 x 45 + 45
                                           CountCase{"text-lstm", 233'133},
                                           // 2,000 x 128 embedding + transformer's 396,544 + 5,805
                                           CountCase{"text-transformer", 658'349},
                                           // 2 x 94 x 64 embeddings; per encoder layer 4 x (64 x 64
                                           // + 64) attention + 64 x 256 + 256 + 256 x 64 + 64 feed-
                                           // forward + 2 x 128 norms = 49,984; per decoder layer one
                                           // more attention and norm: 66,752; 2 x 128 final norms;
                                           // generator 64 x 94 + 94
                                           CountCase{"seq2seq-transformer", 251'870}),
                         [](const auto& info) {
                           std::string n = info.param.model;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Every parameter feeds a differentiable input (so training updates it) and nothing else does:
// the rule importers use to tell parameters from constants agrees with the builders' marking.
TEST_F(ModelZooTest, ParametersAreExactlyTheTrainableInitializers) {
  for (const auto& m : zoo_models()) {
    SCOPED_TRACE(m.name);
    ModelOptions o = structure_only(2);
    o.with_loss = true;
    o.training = true;
    Network net = build_model(m.name, o);
    const auto marked = net.get_params();
    EXPECT_EQ(net.mark_parameters_by_use(), static_cast<int>(marked.size()));
    EXPECT_EQ(net.get_params(), marked);
  }
}

TEST_F(ModelZooTest, ParameterNamesFollowPyTorch) {
  Network net = build_model("resnet18", structure_only());
  for (const char* p :
       {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.bias", "layer4.1.bn2.weight", "fc.weight", "fc.bias"})
    EXPECT_TRUE(net.is_param(p)) << p;
  EXPECT_TRUE(net.is_initializer("layer3.1.bn1.running_var"));
  EXPECT_FALSE(net.is_param("layer3.1.bn1.running_var"));
  EXPECT_EQ(net.fetch_tensor("fc.weight").shape(), (Shape{1000, 512}));
}

// Every model infers (shapes and dtypes through the reference operators) at a small batch, with
// and without the loss, and its logits have the expected shape.
TEST_F(ModelZooTest, EveryModelInfersWithAndWithoutLoss) {
  for (const auto& m : zoo_models()) {
    SCOPED_TRACE(m.name);
    for (bool loss : {false, true}) {
      ModelOptions o = structure_only(2);
      o.with_loss = loss;
      Network net = build_model(m.name, o);
      ASSERT_NO_THROW(net.infer());
      std::vector<int64_t> in = {2};
      in.insert(in.end(), m.default_input.begin(), m.default_input.end());
      // Text models read token ids, the others features.
      EXPECT_EQ(net.desc(kZooInput), (TensorDesc{m.default_vocabulary > 0 ? DType::i64 : DType::f32, Shape(in)}));
      // A language model scores every position over its vocabulary (a translation model every
      // decoder position), a CTC model every step (half the frames, rounded up) over its classes.
      const bool decoder = m.default_target_length > 0;
      const int64_t positions = decoder ? m.default_target_length : m.per_position ? m.default_input.at(0) : 0;
      const bool ctc = m.loss == "ctc", ssd = m.loss == "ssd";
      const int64_t steps = ctc ? (m.default_input.at(1) + 1) / 2 : 0;
      // A detector: 4 anchors at each of 16 x 16 + 8 x 8 positions, 4 offsets and 1 + 10 scores.
      const Shape logits = m.per_position ? Shape{2, positions, m.default_vocabulary}
                           : ctc          ? Shape{2, steps, m.default_classes}
                           : ssd          ? Shape{2, 1280, 4 + m.default_classes + 1}
                                          : Shape{2, m.default_classes};
      EXPECT_EQ(net.desc(kZooLogits).shape, logits);
      EXPECT_EQ(m.loss, m.per_position ? "sequence-ce" : ctc ? "ctc" : ssd ? "ssd" : "softmax-ce");
      if (loss) {
        EXPECT_EQ(net.outputs(), (std::vector<std::string>{kZooLogits, kZooLoss}));
        EXPECT_EQ(net.inputs(), (decoder ? std::vector<std::string>{kZooInput, kZooDecoderInput, kZooLabels}
                                 : ssd   ? std::vector<std::string>{kZooInput, kZooLabels, kZooBoxes}
                                         : std::vector<std::string>{kZooInput, kZooLabels}));
        const Shape labels = m.per_position ? Shape{2, positions}
                             : ctc          ? Shape{2, kZooCtcLabelLength}
                             : ssd          ? Shape{2, kZooDetectionObjects}
                                            : Shape{2};
        EXPECT_EQ(net.desc(kZooLabels), (TensorDesc{DType::i64, labels}));
        EXPECT_EQ(net.desc(kZooLoss).shape, Shape{});
        EXPECT_EQ(count_ops(net, ctc ? "CTCLoss" : ssd ? "SsdLoss" : "SoftmaxCrossEntropyLoss"), 1);
      } else {
        EXPECT_EQ(net.outputs(), (std::vector<std::string>{kZooLogits}));
        EXPECT_EQ(net.inputs(), (decoder ? std::vector<std::string>{kZooInput, kZooDecoderInput}
                                         : std::vector<std::string>{kZooInput}));
      }
    }
  }
}

TEST_F(ModelZooTest, ClassesAndInputShapeAreOptions) {
  ModelOptions o = structure_only(3);
  o.classes = 7;
  o.input_shape = {3, 64, 64};
  Network net = build_model("resnet18", o);
  EXPECT_EQ(net.desc(kZooLogits).shape, (Shape{3, 7}));
  EXPECT_EQ(net.parameter_count(), 11'689'512 - 993 * 513);  // fc: 512x7 + 7 instead of 512x1000 + 1000

  // VGG's adaptive pooling to 7x7: a 32x32 input leaves a 1x1 map (replicated by Expand), a
  // 448x448 one leaves 14x14 (average-pooled by 2).
  o.input_shape = {3, 32, 32};
  EXPECT_EQ(build_model("vgg11", o).desc(kZooLogits).shape, (Shape{3, 7}));
  o.input_shape = {3, 448, 448};
  Network big = build_model("vgg11", o);
  EXPECT_EQ(count_ops(big, "AveragePool"), 1);
  EXPECT_EQ(big.desc(kZooLogits).shape, (Shape{3, 7}));

  o.input_shape = {50, 12};
  Network lstm = build_model("lstm", o);
  EXPECT_EQ(lstm.desc(kZooLogits).shape, (Shape{3, 7}));
  EXPECT_EQ(lstm.fetch_tensor("lstm.W").shape(), (Shape{1, 512, 12}));
  Network tr = build_model("transformer", o);
  EXPECT_EQ(tr.desc(kZooLogits).shape, (Shape{3, 7}));
}

TEST_F(ModelZooTest, BadOptionsAreNamed) {
  ModelOptions o = structure_only();
  o.input_shape = {3, 32};
  try {
    build_model("resnet18", o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("C,H,W"), std::string::npos) << e.what();
  }
  o.input_shape = {3, 8, 8};  // too small for AlexNet's 11x11 stride-4 stem and three poolings
  try {
    build_model("alexnet", o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("alexnet"), std::string::npos) << m;
    EXPECT_NE(m.find("--input-shape"), std::string::npos) << m;
  }
  o.input_shape = {3, 96, 96};  // VGG: a 3x3 map cannot be pooled to 7x7
  EXPECT_THROW(build_model("vgg16", o), InvalidArgument);
  o.input_shape = {};
  o.batch = 0;
  EXPECT_THROW(build_model("lenet5", o), InvalidArgument);
  o.batch = 1;
  o.classes = -2;
  EXPECT_THROW(build_model("lenet5", o), InvalidArgument);
}

TEST_F(ModelZooTest, TrainingModeSwitchesBatchNormAndDropout) {
  ModelOptions o = structure_only(2);
  Network eval = build_model("mobilenet_v2", o);
  o.training = true;
  Network train = build_model("mobilenet_v2", o);
  EXPECT_EQ(count_ops(eval, "Dropout"), 0);  // eval mode leaves Dropout out, as PyTorch's export
  EXPECT_EQ(count_ops(train, "Dropout"), 1);
  EXPECT_EQ(count_ops(train, "BatchNormalization"), count_ops(eval, "BatchNormalization"));
  EXPECT_EQ(count_ops(train, "BatchNormalization"), 52);  // stem, 17 blocks (2 or 3 each), head
  for (const auto& n : train.nodes()) {
    if (n.op_type == "BatchNormalization") {
      EXPECT_EQ(n.attrs.get_int("training_mode", 0), 1) << n.name;
      // Running statistics are not asked for: ONNX's three output slots, two of them unnamed.
      EXPECT_EQ(n.outputs, (std::vector<std::string>{n.name, "", ""})) << n.name;
    }
    if (n.op_type == "Dropout") {
      ASSERT_EQ(n.inputs.size(), 3u);
      ASSERT_NE(train.known_value(n.inputs[2]), nullptr);
      EXPECT_EQ(train.known_value(n.inputs[2])->get(0), 1);
      EXPECT_FLOAT_EQ(static_cast<float>(train.known_value(n.inputs[1])->get(0)), 0.2f);
    }
  }
  for (const auto& n : eval.nodes()) {
    if (n.op_type == "BatchNormalization") {
      EXPECT_FALSE(n.attrs.has("training_mode")) << n.name;
    }
  }
  EXPECT_EQ(train.parameter_count(), eval.parameter_count());
  o.with_loss = true;
  EXPECT_NO_THROW(build_model("transformer", o).infer());
  EXPECT_EQ(count_ops(build_model("transformer", o), "Dropout"), 9);  // embedding + 4 per layer
}

// KWS DS-CNN: the 10x4 stride-2 stem with pads (5, 1) takes 49x10 MFCCs to 25x5, as TF's "same"
// does; global pooling lets 40 log-mel bins through too (25x20) without adding parameters.
TEST_F(ModelZooTest, KwsDscnnTakesMfccsAndLogMelFeatures) {
  ModelOptions o = structure_only(2);
  Network net = build_model("kws-dscnn", o);
  net.infer();
  EXPECT_EQ(net.desc(kZooInput).shape, (Shape{2, 1, 49, 10}));
  EXPECT_EQ(net.desc("conv1").shape, (Shape{2, 64, 25, 5}));
  EXPECT_EQ(net.desc(kZooLogits).shape, (Shape{2, 12}));
  EXPECT_EQ(net.fetch_tensor("conv1.weight").shape(), (Shape{64, 1, 10, 4}));
  int depthwise = 0;
  for (const auto& n : net.nodes())
    if (n.op_type == "Conv" && n.attrs.get_int("group", 1) == 64) ++depthwise;
  EXPECT_EQ(depthwise, 4);
  EXPECT_EQ(count_ops(net, "Conv"), 1 + 2 * 4);
  EXPECT_EQ(count_ops(net, "BatchNormalization"), 1 + 2 * 4);
  EXPECT_EQ(count_ops(net, "GlobalAveragePool"), 1);

  o.input_shape = {1, 49, 40};
  o.classes = 35;
  Network mel = build_model("kws-dscnn", o);
  mel.infer();
  EXPECT_EQ(mel.desc("conv1").shape, (Shape{2, 64, 25, 20}));
  EXPECT_EQ(mel.desc(kZooLogits).shape, (Shape{2, 35}));
  EXPECT_EQ(mel.parameter_count(), 23'756 + 23 * 65);  // fc: 64x35 + 35 instead of 64x12 + 12

  // The reference trains with dropout 0.2 after the stem and 0.4 before the pooling.
  o.training = true;
  std::vector<double> ratios;
  Network train = build_model("kws-dscnn", o);
  for (const auto& n : train.nodes())
    if (n.op_type == "Dropout") ratios.push_back(train.known_value(n.inputs[1])->get(0));
  ASSERT_EQ(ratios.size(), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(ratios[0]), 0.2f);
  EXPECT_FLOAT_EQ(static_cast<float>(ratios[1]), 0.4f);

  o.input_shape = {49, 10};
  EXPECT_THROW(build_model("kws-dscnn", o), InvalidArgument);
}

// Speech CTC: 149 frames of 40 log-mel bins become 75 steps of 32 x 10 features (conv1 halves
// both axes, conv2 the bins only), which the bidirectional LSTM reads sequence first; every step
// is scored. Other frame and bin counts change the steps and the LSTM's input width.
// Anchors by map, row, column, then shape (heights 11, 15 on the 16 x 16 map, 19, 25 on the 8 x 8
// one, widths 0.35 and 0.75 of the height), centred on their position: a 64-pixel input gives
// strides 4 and 8, so the first anchor sits at (2, 2) with half extents 1.925 x 5.5.
TEST_F(ModelZooTest, DetectorSsdPredictsPerAnchorAndHoldsItsAnchors) {
  ModelOptions o = structure_only(2);
  Network net = build_model("detector-ssd", o);
  net.infer();
  EXPECT_EQ(net.desc("backbone.relu4").shape, (Shape{2, 64, 16, 16}));
  EXPECT_EQ(net.desc("backbone.relu5").shape, (Shape{2, 64, 8, 8}));
  EXPECT_EQ(net.desc(kZooLogits), (TensorDesc{DType::f32, Shape{2, 1280, 15}}));
  ASSERT_TRUE(net.is_initializer(kZooAnchors));
  EXPECT_FALSE(net.is_param(kZooAnchors));
  const Tensor anchors = net.fetch_tensor(kZooAnchors);
  ASSERT_EQ(anchors.shape(), (Shape{1280, 4}));
  const auto anchor = [&](int64_t i) {
    return std::vector<double>{anchors.get(i * 4), anchors.get(i * 4 + 1), anchors.get(i * 4 + 2),
                               anchors.get(i * 4 + 3)};
  };
  const auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
  };
  near(anchor(0), {0.075, -3.5, 3.925, 7.5});       // (2, 2), height 11, width 3.85
  near(anchor(3), {-3.625, -5.5, 7.625, 9.5});      // (2, 2), height 15, width 11.25
  near(anchor(4), {4.075, -3.5, 7.925, 7.5});       // the next column: centre (6, 2)
  near(anchor(16 * 4), {0.075, 0.5, 3.925, 11.5});  // the next row: centre (2, 6)
  near(anchor(1024), {0.675, -5.5, 7.325, 13.5});   // the 8 x 8 map: (4, 4), height 19, width 6.65
  near(anchor(1279), {50.625, 47.5, 69.375, 72.5}); // its last: (60, 60), height 25, width 18.75

  // A 96-pixel input: 24 x 24 and 12 x 12 maps; three classes: 4 + 1 + 3 values per anchor, and
  // the prediction convolutions shrink from 60 to 32 channels (64 x 9 + 1 weights each fewer).
  o.input_shape = {1, 96, 96};
  o.classes = 3;
  Network big = build_model("detector-ssd", o);
  EXPECT_EQ(big.desc(kZooLogits).shape, (Shape{2, (24 * 24 + 12 * 12) * 4, 8}));
  EXPECT_EQ(big.parameter_count(), 166'632 - 2 * 28 * (64 * 9 + 1));
}

TEST_F(ModelZooTest, SpeechCtcScoresEveryStepOfTheSpectrogram) {
  ModelOptions o = structure_only(2);
  Network net = build_model("speech-ctc", o);
  net.infer();
  EXPECT_EQ(net.desc(kZooInput).shape, (Shape{2, 1, 149, 40}));
  EXPECT_EQ(net.desc("relu1").shape, (Shape{2, 32, 75, 20}));
  EXPECT_EQ(net.desc("relu2").shape, (Shape{2, 32, 75, 10}));
  EXPECT_EQ(net.desc("flatten_features").shape, (Shape{75, 2, 320}));
  EXPECT_EQ(net.desc("lstm.concat").shape, (Shape{2, 75, 256}));
  EXPECT_EQ(net.desc(kZooLogits), (TensorDesc{DType::f32, Shape{2, 75, 11}}));
  EXPECT_EQ(net.fetch_tensor("lstm.W").shape(), (Shape{2, 512, 320}));
  EXPECT_EQ(net.fetch_tensor("conv1.bias").shape(), (Shape{32}));
  EXPECT_EQ(count_ops(net, "BatchNormalization"), 2);
  const auto lstm =
      std::find_if(net.nodes().begin(), net.nodes().end(), [](const Node& n) { return n.op_type == "LSTM"; });
  ASSERT_NE(lstm, net.nodes().end());
  EXPECT_EQ(lstm->attrs.get_string("direction", "forward"), "bidirectional");

  // Odd and even frame counts: ceil(frames / 2) steps; 64 bins give 16 x 32 features.
  o.input_shape = {1, 100, 64};
  o.classes = 29;
  Network other = build_model("speech-ctc", o);
  EXPECT_EQ(other.desc(kZooLogits).shape, (Shape{2, 50, 29}));
  EXPECT_EQ(other.fetch_tensor("lstm.W").shape(), (Shape{2, 512, 512}));
  // The LSTM's W grows by 2 x 512 x 192, fc by 256 x 18 + 18.
  EXPECT_EQ(other.parameter_count(), 473'835 + 2 * 512 * 192 + 257 * 18);

  // The loss: as Level 2's ctc head, LogSoftmax over the classes of [steps, batch, classes], then
  // CTCLoss with blank 0 on label sequences padded with -100.
  o.input_shape = {1, 9, 40};
  o.with_loss = true;
  Network loss = build_model("speech-ctc", o);
  EXPECT_EQ(loss.desc("loss/log_probs").shape, (Shape{5, 2, 29}));
  EXPECT_EQ(loss.desc(kZooLabels), (TensorDesc{DType::i64, Shape{2, kZooCtcLabelLength}}));
  const Node& ctc = loss.node(kZooLoss);
  EXPECT_EQ(ctc.op_type, "CTCLoss");
  EXPECT_EQ(ctc.attrs.get_int("blank", -1), 0);
  EXPECT_EQ(ctc.attrs.get_int("zero_infinity", 0), 1);
  EXPECT_EQ(ctc.attrs.get_string("reduction", ""), "mean");

  o.input_shape = {149, 40};
  EXPECT_THROW(build_model("speech-ctc", o), InvalidArgument);
}

// Seq2seq Transformer: source ids and decoder ids in, every decoder position scored over the
// vocabulary; the decoder's self-attention is causal, its second attention reads the encoder.
TEST_F(ModelZooTest, Seq2seqTransformerReadsSourceAndDecoderIds) {
  ModelOptions o = structure_only(3);
  o.vocabulary = 50;
  o.input_shape = {7};
  o.target_length = 11;
  Network net = build_model("seq2seq-transformer", o);
  net.infer();
  EXPECT_EQ(net.desc(kZooInput), (TensorDesc{DType::i64, Shape{3, 7}}));
  EXPECT_EQ(net.desc(kZooDecoderInput), (TensorDesc{DType::i64, Shape{3, 11}}));
  EXPECT_EQ(net.desc(kZooLogits), (TensorDesc{DType::f32, Shape{3, 11, 50}}));
  EXPECT_EQ(net.desc("decoder.layers.0.self_attn.scores").shape, (Shape{3, 4, 11, 11}));
  EXPECT_EQ(net.desc("decoder.layers.0.multihead_attn.scores").shape, (Shape{3, 4, 11, 7}));
  EXPECT_EQ(net.desc("encoder.layers.1.self_attn.scores").shape, (Shape{3, 4, 7, 7}));
  const Tensor mask = net.fetch_tensor("causal_mask");
  ASSERT_EQ(mask.shape(), (Shape{11, 11}));
  EXPECT_EQ(mask.get(0 * 11 + 0), 0.0);
  EXPECT_EQ(mask.get(5 * 11 + 2), 0.0);
  EXPECT_TRUE(std::isinf(mask.get(2 * 11 + 5)) && mask.get(2 * 11 + 5) < 0);
  EXPECT_EQ(count_ops(net, "LayerNormalization"), 2 * 2 + 2 * 3 + 2);
  EXPECT_EQ(count_ops(net, "Softmax"), 2 + 2 * 2);

  // Its loss is the language model's, over the decoder positions.
  o.with_loss = true;
  EXPECT_EQ(build_model("seq2seq-transformer", o).desc(kZooLabels), (TensorDesc{DType::i64, Shape{3, 11}}));
  // Models without a decoder refuse a target length.
  try {
    build_model("text-transformer", o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no decoder"), std::string::npos) << e.what();
  }
}

TEST_F(ModelZooTest, ArchitecturesHaveTheirBlocks) {
  // Bottlenecks from 50 layers on: 3 convolutions per block plus 4 projections and the stem.
  EXPECT_EQ(count_ops(build_model("resnet50", structure_only()), "Conv"), 1 + 16 * 3 + 4);
  EXPECT_EQ(count_ops(build_model("resnet152", structure_only()), "Conv"), 1 + 50 * 3 + 4);
  EXPECT_EQ(count_ops(build_model("resnet34", structure_only()), "Conv"), 1 + 16 * 2 + 3);
  // CIFAR ResNets: option-A shortcuts add no convolution: 1 + 2 * 3n.
  Network r110 = build_model("resnet110", structure_only());
  EXPECT_EQ(count_ops(r110, "Conv"), 1 + 2 * 54);
  EXPECT_EQ(count_ops(r110, "Pad"), 2);
  EXPECT_EQ(count_ops(build_model("wrn-28-10", structure_only()), "Conv"), 1 + 2 * 12 + 3);
  Network mb = build_model("mobilenet_v2", structure_only());
  int depthwise = 0;
  for (const auto& n : mb.nodes())
    if (n.op_type == "Conv" && n.attrs.get_int("group", 1) > 1) ++depthwise;
  EXPECT_EQ(depthwise, 17);
  Network tr = build_model("transformer", structure_only());
  EXPECT_EQ(count_ops(tr, "Softmax"), 2);
  EXPECT_EQ(count_ops(tr, "LayerNormalization"), 4);
  EXPECT_EQ(count_ops(tr, "Tanh"), 2);  // one GELU per layer
  EXPECT_EQ(count_ops(build_model("lstm", structure_only()), "LSTM"), 1);
}

}  // namespace
}  // namespace d5
