#include "deep500/train/loss_head.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"

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

}  // namespace

std::vector<std::string> loss_head_names() { return {"softmax-ce", "sequence-ce", "mse"}; }

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
  return append_loss_head(network, "softmax-ce", LossHeadOptions{labels, loss});
}

}  // namespace d5
