// The zoo's registry: names, descriptions and default inputs, and option resolution.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/registry.h"
#include "deep500/op/op_registry.h"
#include "zoo_builder.h"

namespace d5 {

namespace {

using Dims = std::vector<int64_t>;
const Dims kImageNet = {3, 224, 224}, kCifar = {3, 32, 32}, kMnist = {1, 28, 28};
// Text models' defaults: wordnet-glosses' (32 tokens, 2000 pieces, 45 lexicographer files).
constexpr int64_t kTextLength = 32, kTextVocabulary = 2000, kTextClasses = 45;
// Translation models' defaults: number-words' (docs/text-datasets.md#number-words).
constexpr int64_t kTranslationSource = 9, kTranslationTarget = 12, kTranslationVocabulary = 94;

Registry<ZooModel>* make_models() {
  auto* m = new Registry<ZooModel>("model");
  auto add = [&](std::string name, std::string description, Dims input, int64_t classes,
                 std::function<Network(const ModelOptions&)> build, std::string loss = "softmax-ce") {
    ZooModel model{name, description, std::move(input), classes, std::move(build)};
    model.loss = std::move(loss);
    m->add(name, description, std::move(model));
  };
  add("lenet5", "LeNet-5: two 5x5 convolutions, three linear layers (MNIST)", kMnist, 10, zoo::build_lenet5);
  add("mlp", "MLP: 512-256 hidden units with ReLU", kMnist, 10, zoo::build_mlp);
  add("alexnet", "AlexNet (torchvision): five convolutions, 4096-4096 classifier", kImageNet, 1000,
      zoo::build_alexnet);
  for (const char* v : {"vgg11", "vgg16"})
    add(v, fmt::format("VGG-{} (torchvision, no batch norm)", v + 3), kImageNet, 1000,
        [name = std::string(v)](const ModelOptions& o) { return zoo::build_vgg(name, o); });
  for (const char* r : {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}) {
    const int depth = std::stoi(std::string(r + 6));
    add(r,
        fmt::format("ResNet-{} for ImageNet (torchvision), {} blocks", depth,
                    depth >= 50 ? "bottleneck" : "basic"),
        kImageNet, 1000,
        [name = std::string(r)](const ModelOptions& o) { return zoo::build_resnet(name, o); });
  }
  for (int depth : {20, 32, 44, 56, 110}) {
    const std::string name = "resnet" + std::to_string(depth);
    add(name,
        fmt::format("ResNet-{} for CIFAR: 3 stages of {} basic blocks, option-A shortcuts", depth,
                    (depth - 2) / 6),
        kCifar, 10, [name, depth](const ModelOptions& o) { return zoo::build_resnet_cifar(name, depth, o); });
  }
  add("wrn-28-10", "Wide ResNet 28-10 for CIFAR: pre-activation blocks, widths 160/320/640", kCifar, 10,
      [](const ModelOptions& o) { return zoo::build_wide_resnet("wrn-28-10", 28, 10, o); });
  add("mobilenet_v2", "MobileNetV2 (torchvision, width 1.0): inverted residuals, depthwise convolutions",
      kImageNet, 1000, zoo::build_mobilenet_v2);
  // MFCCs of a one-second clip (49 frames of 10 coefficients); ten words, "unknown" and "silence".
  add("kws-dscnn",
      "KWS DS-CNN (MLPerf Tiny): 10x4 convolution, 4 depthwise-separable blocks, 64 channels (speech features)",
      {1, 49, 10}, 12, zoo::build_kws_dscnn);
  // Log-mel spectrograms of 3-second clips (149 frames of 40 bins); class 0 is CTC's blank, 1..10
  // the digits zero..nine. Float features in, per-step scores out: no vocabulary, and its labels
  // are sequences rather than one per position, so it is no per_position model.
  add("speech-ctc",
      "Speech CTC: two convolutions (time stride 2), a bidirectional 128-unit LSTM, per-step scores for CTC "
      "(log-mel features)",
      {1, 149, 40}, 11, zoo::build_speech_ctc, "ctc");
  // mnist-scenes' grey 64 x 64 canvases; ten digit classes (the background is the model's own).
  add("detector-ssd",
      "SSD detector: 5-convolution backbone, anchors on 16x16 and 8x8 maps, box offsets and class scores per "
      "anchor (detection)",
      {1, 64, 64}, 10, zoo::build_detector_ssd, "ssd");
  add("lstm", "LSTM classifier: one 128-unit LSTM layer, Gemm on the last step", {28, 28}, 10,
      zoo::build_lstm_classifier);
  add("transformer", "Transformer encoder: 2 layers, d_model 128, 4 heads, GELU feed-forward 512", {32, 64},
      10, zoo::build_transformer);
  auto add_text = [&](std::string name, std::string description, std::function<Network(const ModelOptions&)> build,
                      bool per_position = false) {
    // A language model's classes are its pieces.
    m->add(name, description,
           {name, description, {kTextLength}, per_position ? kTextVocabulary : kTextClasses, std::move(build),
            kTextVocabulary, per_position, per_position ? "sequence-ce" : "softmax-ce"});
  };
  add_text("text-lstm", "Text LSTM: 64-wide token embedding, one 128-unit LSTM layer, Gemm on the last step",
           zoo::build_text_lstm);
  add_text("text-lstm-lm",
           "Text LSTM language model: 64-wide token embedding, one 128-unit LSTM layer, next-piece scores at every "
           "step (train with --loss sequence-ce)",
           zoo::build_text_lstm_lm, true);
  add_text("text-transformer",
           "Text Transformer: 128-wide token embedding, 2 encoder layers, 4 heads, mean pooling",
           zoo::build_text_transformer);
  {
    // number-words' defaults: numerals of up to 6 digits and their words in a shared vocabulary.
    ZooModel s2s{"seq2seq-transformer",
                 "Seq2seq Transformer: 2 encoder and 2 decoder layers, d_model 64, 4 heads, greedy decoding "
                 "(translation)",
                 {kTranslationSource}, kTranslationVocabulary, zoo::build_seq2seq_transformer,
                 kTranslationVocabulary, true, "sequence-ce", kTranslationTarget};
    std::string name = s2s.name, description = s2s.description;
    m->add(std::move(name), std::move(description), std::move(s2s));
  }
  return m;
}

Registry<ZooModel>& models() {
  static Registry<ZooModel>* r = make_models();
  return *r;
}

std::vector<std::string> text_model_names() {
  std::vector<std::string> names;
  for (const auto& m : models().values())
    if (m->default_vocabulary > 0) names.push_back(m->name);
  return names;
}

}  // namespace

void register_model(ZooModel model) {
  std::string name = model.name, description = model.description;
  models().add(std::move(name), std::move(description), std::move(model));
}

std::vector<ZooModel> zoo_models() {
  std::vector<ZooModel> out;
  for (const auto& m : models().values()) out.push_back(*m);
  return out;
}

Network build_model(const std::string& name, const ModelOptions& options) {
  const std::shared_ptr<const ZooModel> it = models().get(name);
  ModelOptions o = options;
  D5_CHECK_ARG(o.batch >= 1, "model '{}': batch must be at least 1, got {}", name, o.batch);
  D5_CHECK_ARG(o.classes >= 0, "model '{}': classes must be positive (0 for the default {}), got {}", name,
               it->default_classes, o.classes);
  if (o.classes == 0) o.classes = it->default_classes;
  D5_CHECK_ARG(o.vocabulary >= 0, "model '{}': vocabulary must be positive (0 for the default), got {}", name,
               o.vocabulary);
  D5_CHECK_ARG(o.vocabulary == 0 || it->default_vocabulary > 0,
               "model '{}' reads float features, not token ids, so a vocabulary ({}) means nothing to it: text "
               "sets train text models ({})",
               name, o.vocabulary, fmt::join(text_model_names(), ", "));
  if (o.vocabulary == 0) o.vocabulary = it->default_vocabulary;
  D5_CHECK_ARG(o.target_length >= 0, "model '{}': target length must be positive (0 for the default), got {}",
               name, o.target_length);
  D5_CHECK_ARG(o.target_length == 0 || it->default_target_length > 0,
               "model '{}' has no decoder, so a target length ({}) means nothing to it", name, o.target_length);
  if (o.target_length == 0) o.target_length = it->default_target_length;
  if (o.input_shape.empty()) o.input_shape = it->default_input;
  for (int64_t d : o.input_shape)
    D5_CHECK_ARG(d >= 1, "model '{}': input shape [{}] has an extent below 1", name,
                 fmt::join(o.input_shape, ","));
  try {
    return it->build(o);
  } catch (const Error& e) {
    // Layer errors name the layer; say which model and input they came from.
    if (std::string(e.what()).find("model '") != std::string::npos) throw;
    rethrow_with_message(
        e, fmt::format("model '{}' with input [{}]: {}", name, fmt::join(o.input_shape, ","), e.what()));
  }
}

double forward_flops(const Network& network) {
  network.infer();
  double total = 0;
  for (const Node* n : network.topological_order()) {
    if (network.is_folded(n->name)) continue;
    total += OpRegistry::global().create(network.spec(n->name), "reference")->flops();
  }
  return total;
}

}  // namespace d5
