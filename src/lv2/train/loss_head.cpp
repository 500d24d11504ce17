#include "deep500/train/loss_head.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/net/tensor_names.h"

namespace d5 {

namespace {

// The single graph output a head reads, inferred.
std::string prediction_of(Network& network, const std::string& kind) {
  const auto& outputs = network.outputs();
  D5_CHECK_ARG(outputs.size() == 1, "network '{}' has {} graph outputs; the {} loss head reads exactly one",
               network.name(), outputs.size(), kind);
  network.infer();
  return outputs.front();
}

void check_free(const Network& network, const std::string& name) {
  D5_CHECK_ARG(!network.has_node(name) && network.producer(name) == nullptr && !network.has_value(name) &&
                   std::find(network.inputs().begin(), network.inputs().end(), name) == network.inputs().end(),
               "network '{}' already has a tensor or node named '{}'", network.name(), name);
}

// CTCLoss wants [T, N, C] log-probabilities and every length: the steps from the prediction's
// shape, each target's length counted from its labels before the padding.
void append_ctc(Network& network, const std::string& prediction, const TensorDesc& d, const LossHeadOptions& o) {
  D5_CHECK_ARG(d.shape.rank() == 3 && d.dtype == DType::f32,
               "output '{}' of network '{}' is {}; the ctc head needs f32 per-step class scores [batch, steps, "
               "classes]",
               prediction, network.name(), d.to_string());
  D5_CHECK_ARG(o.label_shape.size() == 1 && o.label_shape[0] >= 1,
               "the ctc head needs the label sequences' padded length S (label_shape {{S}}), got {} dimensions",
               o.label_shape.size());
  const int64_t n = d.shape[0], steps = d.shape[1];
  D5_CHECK_ARG(o.blank >= 0 && o.blank < d.shape[2], "the ctc head's blank class {} is outside [0, {})", o.blank,
               d.shape[2]);
  const std::string p = o.loss + "/";
  for (const char* t : {"steps", "log_probs", "ignore", "padding", "labelled", "labelled_i64", "axes",
                        "target_lengths", "input_lengths"})
    check_free(network, p + t);
  network.add_input(o.labels, TensorDesc{DType::i64, Shape{n, o.label_shape[0]}});
  Tensor lengths(DType::i64, Shape{n});
  lengths.fill(static_cast<double>(steps));
  network.feed_tensor(p + "input_lengths", lengths);
  network.feed_tensor(p + "ignore", Tensor::from_values<int64_t>(Shape{}, {o.ignore_index}));
  network.feed_tensor(p + "axes", Tensor::from_values<int64_t>(Shape{1}, {1}));
  network.add_node({p + "steps", "Transpose", "", Attributes{{"perm", std::vector<int64_t>{1, 0, 2}}}, {prediction},
                    {p + "steps"}});
  network.add_node({p + "log_probs", "LogSoftmax", "", Attributes{{"axis", int64_t{2}}}, {p + "steps"},
                    {p + "log_probs"}});
  network.add_node({p + "padding", "Equal", "", {}, {o.labels, p + "ignore"}, {p + "padding"}});
  network.add_node({p + "labelled", "Not", "", {}, {p + "padding"}, {p + "labelled"}});
  network.add_node({p + "labelled_i64", "Cast", "", Attributes{{"to", int64_t{7}}}, {p + "labelled"},
                    {p + "labelled_i64"}});  // 7: ONNX's INT64
  network.add_node({p + "target_lengths", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}},
                    {p + "labelled_i64", p + "axes"}, {p + "target_lengths"}});
  network.add_node({o.loss, "CTCLoss", "",
                    Attributes{{"blank", o.blank}, {"reduction", std::string("mean")}, {"zero_infinity", int64_t{1}}},
                    {p + "log_probs", o.labels, p + "input_lengths", p + "target_lengths"},
                    {o.loss}});
}

// SsdLoss reads the anchors the detector was built with: the head cannot invent them.
void append_ssd(Network& network, const std::string& prediction, const TensorDesc& d, const LossHeadOptions& o) {
  D5_CHECK_ARG(d.shape.rank() == 3 && d.dtype == DType::f32 && d.shape[2] >= 6,
               "output '{}' of network '{}' is {}; the ssd head needs an f32 prediction [batch, anchors, 4 + classes] "
               "(box offsets, then class scores with the background first)",
               prediction, network.name(), d.to_string());
  D5_CHECK_ARG(network.is_initializer(kZooAnchors) && !network.is_param(kZooAnchors),
               "network '{}' has no constant '{}' [anchors, 4]: the ssd head matches objects to the anchors the "
               "detector was built with (a detector-ssd from the model zoo has them)",
               network.name(), kZooAnchors);
  D5_CHECK_ARG(network.desc(kZooAnchors).shape == Shape({d.shape[1], 4}),
               "the constant '{}' of network '{}' is {}; the prediction '{}' has {} anchors, so it must be [{}, 4]",
               kZooAnchors, network.name(), network.desc(kZooAnchors).to_string(), prediction, d.shape[1],
               d.shape[1]);
  D5_CHECK_ARG(o.label_shape.size() == 1 && o.label_shape[0] >= 1,
               "the ssd head needs the objects per image M (label_shape {{M}}), got {} dimensions",
               o.label_shape.size());
  check_free(network, kZooBoxes);
  const int64_t n = d.shape[0], m = o.label_shape[0];
  network.add_input(o.labels, TensorDesc{DType::i64, Shape{n, m}});
  network.add_input(kZooBoxes, TensorDesc{DType::f32, Shape{n, m, 4}});
  network.add_node({o.loss, "SsdLoss", "", Attributes{{"ignore_index", o.ignore_index}},
                    {prediction, kZooAnchors, kZooBoxes, o.labels}, {o.loss}});
}

}  // namespace

std::vector<std::string> loss_head_names() { return {"softmax-ce", "sequence-ce", "mse", "ctc", "ssd"}; }

LossHead append_loss_head(Network& network, const std::string& kind, const LossHeadOptions& o) {
  const std::vector<std::string> known = loss_head_names();
  D5_CHECK_ARG(std::find(known.begin(), known.end(), kind) != known.end(), "unknown loss head '{}' (known: {})",
               kind, fmt::join(known, ", "));
  const std::string prediction = prediction_of(network, kind);
  const TensorDesc d = network.desc(prediction);
  const std::string scores = o.loss + "/scores";  // sequence-ce's transposed logits
  for (const std::string& name : {o.labels, o.loss}) check_free(network, name);
  if (kind == "sequence-ce") check_free(network, scores);

  LossHead head{prediction, o.labels, o.loss, {}};
  Attributes mean{{"reduction", std::string("mean")}};
  if (kind == "softmax-ce") {
    D5_CHECK_ARG(d.shape.rank() == 2 && d.dtype == DType::f32,
                 "output '{}' of network '{}' is {}; the softmax-ce head needs f32 logits [batch, classes]",
                 prediction, network.name(), d.to_string());
    network.add_input(o.labels, TensorDesc{DType::i64, Shape{d.shape[0]}});
    network.add_node({o.loss, "SoftmaxCrossEntropyLoss", "", mean, {prediction, o.labels}, {o.loss}});
    head.quality = {"accuracy"};
  } else if (kind == "sequence-ce") {
    D5_CHECK_ARG(d.shape.rank() == 3 && d.dtype == DType::f32,
                 "output '{}' of network '{}' is {}; the sequence-ce head needs f32 logits [batch, positions, "
                 "classes]",
                 prediction, network.name(), d.to_string());
    network.add_input(o.labels, TensorDesc{DType::i64, Shape{d.shape[0], d.shape[1]}});
    network.add_node({scores, "Transpose", "", Attributes{{"perm", std::vector<int64_t>{0, 2, 1}}}, {prediction},
                      {scores}});
    mean.set("ignore_index", o.ignore_index);
    network.add_node({o.loss, "SoftmaxCrossEntropyLoss", "", mean, {scores, o.labels}, {o.loss}});
    head.quality = {"accuracy", "perplexity"};
  } else if (kind == "ctc") {
    append_ctc(network, prediction, d, o);
    head.quality = {"cer"};
  } else if (kind == "ssd") {
    append_ssd(network, prediction, d, o);
    head.quality = {"map50", "map"};
  } else {
    D5_CHECK_ARG(d.shape.rank() >= 1 && d.dtype == DType::f32,
                 "output '{}' of network '{}' is {}; the mse head needs an f32 prediction [batch, ...]", prediction,
                 network.name(), d.to_string());
    network.add_input(o.labels, d);
    network.add_node({o.loss, "MSELoss", "", mean, {prediction, o.labels}, {o.loss}});
    head.quality = {"mse"};
  }
  network.add_output(o.loss);
  return head;
}

LossHead append_softmax_cross_entropy(Network& network, const std::string& labels, const std::string& loss) {
  LossHeadOptions o;
  o.labels = labels;
  o.loss = loss;
  return append_loss_head(network, "softmax-ce", o);
}

}  // namespace d5
