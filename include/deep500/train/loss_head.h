#pragma once
// Level 2: a loss for a classifier loaded from a file (docs/training.md).
//
// A model zoo network is built with its loss; an ONNX classifier usually has none. This appends
// what the zoo appends: a graph input of int64 class labels and a SoftmaxCrossEntropyLoss with mean
// reduction over the batch, reading the classifier's single output.
#include <string>

#include "deep500/net/network.h"

namespace d5 {

struct LossHead {
  std::string logits;  // the classifier output the loss reads
  std::string labels;  // the new graph input ([batch], i64)
  std::string loss;    // the new graph output (a scalar)
};

// The network must have exactly one graph output, shaped [batch, classes] in f32, and no tensor
// named `labels` or `loss` yet; otherwise InvalidArgument saying which. Infers the network.
LossHead append_softmax_cross_entropy(Network& network, const std::string& labels = "labels",
                                      const std::string& loss = "loss");

}  // namespace d5
