#pragma once
// Level 2: loss heads (docs/quality.md#loss-heads): what training appends to a network that has
// none, such as one loaded from an ONNX file.
//
// A head reads the network's single graph output (the prediction), adds a graph input for the
// labels and a loss node whose scalar output becomes a graph output:
//
// - softmax-ce:  logits [N, C] f32, labels [N] i64; SoftmaxCrossEntropyLoss, mean over the batch
//                (what the model zoo's classifiers append);
// - sequence-ce: logits [N, T, C] f32 (class axis last), labels [N, T] i64; the scores are
//                transposed to ONNX's [N, C, T] and SoftmaxCrossEntropyLoss averages over the
//                positions whose label is not ignore_index (padding);
// - mse:         a prediction [N, ...] f32, a target of its shape f32; MSELoss, mean;
// - ctc:         per-step class scores [N, T, C] f32, label sequences [N, S] i64, left-aligned and
//                padded with ignore_index; LogSoftmax over the classes, then CTCLoss with every
//                input T steps long, each target as long as its labels before the padding, mean
//                per target label, zero_infinity (a target too long for T steps costs nothing
//                instead of an infinite loss).
// - ssd:         a single-shot detector's prediction [N, A, 4 + K] f32 (per anchor four box offsets,
//                then K class scores, the background first) and the network's constant "anchors"
//                [A, 4]; reads labels [N, M] i64 (object classes, ignore_index on padding rows) and
//                a second new graph input "boxes" [N, M, 4] f32; SsdLoss (matching, smooth-L1 on
//                the offsets, cross-entropy on positives and 3x as many hard negatives, over the
//                positives; docs/detection.md).
//
// Each head names the quality measures that suit it (quality.h), the default of a run.
#include <cstdint>
#include <string>
#include <vector>

#include "deep500/net/network.h"
#include "deep500/train/quality.h"

namespace d5 {

struct LossHead {
  std::string logits;  // the network output the loss reads (the prediction)
  std::string labels;  // the new graph input
  std::string loss;    // the new graph output (a scalar)
  std::vector<std::string> quality;  // the measures that suit the head: accuracy, perplexity, mse ...
};

struct LossHeadOptions {
  std::string labels = "labels";
  std::string loss = "loss";
  int64_t ignore_index = kDefaultIgnoreIndex;  // sequence-ce, ctc: the label of a padding position
  int64_t blank = 0;                           // ctc: the blank class
  std::vector<int64_t> label_shape{};          // ctc: {S}, the label sequences' padded length; ssd: {M}
};

// softmax-ce, sequence-ce, mse, ctc, ssd.
std::vector<std::string> loss_head_names();

// The network must have exactly one graph output of the layout the head reads, and no tensor or
// node named like the labels or the loss yet; otherwise InvalidArgument saying which. An unknown
// kind is an InvalidArgument naming the known ones. Infers the network.
LossHead append_loss_head(Network& network, const std::string& kind, const LossHeadOptions& options = {});

// append_loss_head(network, "softmax-ce", {labels, loss}).
LossHead append_softmax_cross_entropy(Network& network, const std::string& labels = "labels",
                                      const std::string& loss = "loss");

}  // namespace d5
