#include "deep500/train/loss_head.h"

#include <algorithm>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5 {

LossHead append_softmax_cross_entropy(Network& network, const std::string& labels, const std::string& loss) {
  const auto& outputs = network.outputs();
  D5_CHECK_ARG(outputs.size() == 1,
               "network '{}' has {} graph outputs; a classification loss needs exactly one (the logits)",
               network.name(), outputs.size());
  const std::string logits = outputs.front();
  network.infer();
  const TensorDesc& d = network.desc(logits);
  D5_CHECK_ARG(d.shape.rank() == 2 && d.dtype == DType::f32,
               "output '{}' of network '{}' is {}; a classification loss needs f32 logits [batch, classes]", logits,
               network.name(), d.to_string());
  for (const std::string& name : {labels, loss}) {
    D5_CHECK_ARG(!network.has_node(name) && network.producer(name) == nullptr && !network.has_value(name) &&
                     std::find(network.inputs().begin(), network.inputs().end(), name) == network.inputs().end(),
                 "network '{}' already has a tensor or node named '{}'", network.name(), name);
  }
  network.add_input(labels, TensorDesc{DType::i64, Shape{d.shape[0]}});
  network.add_node({loss, "SoftmaxCrossEntropyLoss", "", Attributes{{"reduction", std::string("mean")}},
                    {logits, labels}, {loss}});
  network.add_output(loss);
  return {logits, labels, loss};
}

}  // namespace d5
