#pragma once
// Level 1: the model zoo (docs/model-zoo.md). Builders emit a d5::Network of ONNX operators
// (opset 17) with parameters initialized the way PyTorch initializes its layers, so a zoo model is
// a benchmark workload for every executor and can be exported to ONNX.
//
// Every model reads one graph input "input" ([batch, ...input_shape], f32) and writes "logits"
// ([batch, classes]). With with_loss it also reads "labels" ([batch], i64) and writes "loss" (a
// scalar: SoftmaxCrossEntropyLoss with mean reduction), the tensor inference_and_backprop takes.
// A language model (text-lstm-lm) writes logits [batch, positions, vocabulary] instead and its loss
// reads labels [batch, positions], skipping positions labelled -100. A CTC model (speech-ctc) writes
// per-step scores [batch, steps, classes] and its loss reads label sequences [batch,
// kZooCtcLabelLength], left-aligned and padded with -100: LogSoftmax, then CTCLoss (deep500's
// operator: ONNX has none, so such a network exports without its loss only). A sequence-to-sequence
// model (seq2seq-transformer) reads a second input "decoder_input" ([batch, target_length], i64:
// the target shifted right behind a start token) and writes logits [batch, target_length,
// vocabulary]; its loss is the language model's. A single-shot detector (detector-ssd) writes a
// prediction [batch, anchors, 4 + classes + 1] (box offsets from each anchor, then class scores
// with the background first) and holds its anchors as the constant "anchors" [anchors, 4]; its
// loss (SsdLoss) reads labels [batch, kZooDetectionObjects] and "boxes" [batch,
// kZooDetectionObjects, 4].
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deep500/net/tensor_names.h"
#include "deep500/net/network.h"

namespace d5 {

// The padded length of the label sequences a CTC model's loss reads (with_loss): spoken-digits'
// default, up to 7 digits in a 3-second clip (docs/speech-datasets.md).
inline constexpr int64_t kZooCtcLabelLength = 7;
// The objects per image a detector's loss reads (with_loss): mnist-scenes' default maximum.
inline constexpr int64_t kZooDetectionObjects = 5;

struct ModelOptions {
  int64_t batch = 1;
  int64_t classes = 0;               // 0: the model's default
  std::vector<int64_t> input_shape;  // per sample (C,H,W or sequence length, features); empty: default
  // Text models read token ids in [0, vocabulary) (an i64 input [batch, length]); 0: the model's
  // default. Models with a float input refuse a vocabulary.
  int64_t vocabulary = 0;
  // Sequence-to-sequence models: the decoder input's length; 0: the model's default. Other models
  // refuse one.
  int64_t target_length = 0;
  bool with_loss = false;
  // Training mode: BatchNormalization normalizes with batch statistics (training_mode=1, the
  // running-statistics outputs left unnamed) and Dropout nodes drop (training_mode input true). In
  // inference mode Dropout is left out, as PyTorch's eval-mode export does.
  bool training = false;
  uint64_t seed = 0x5eed;  // parameter initialization and dropout masks
  // false leaves parameters zero: for counting parameters and operations, where drawing hundreds
  // of millions of random numbers would be wasted time.
  bool initialize = true;
};

struct ZooModel {
  std::string name;
  std::string description;
  std::vector<int64_t> default_input;  // per sample
  int64_t default_classes;
  std::function<Network(const ModelOptions&)> build;  // options already resolved (no zeros)
  int64_t default_vocabulary = 0;  // > 0: the input is token ids (text models); 0: float features
  // Scores every position over the vocabulary (a language model): logits [batch, positions,
  // vocabulary], labels [batch, positions]; default_classes is then the vocabulary.
  bool per_position = false;
  // The loss with_loss appends, named as Level 2's loss heads (include/deep500/train/loss_head.h),
  // so `d5 train --loss` can take the same: softmax-ce (logits [batch, classes], labels [batch]),
  // sequence-ce (per_position), ctc (per-step scores [batch, steps, classes], class 0 the blank) or
  // ssd (a detector's prediction with its anchors).
  std::string loss = "softmax-ce";
  // > 0: a sequence-to-sequence model whose decoder reads "decoder_input" of this many ids by
  // default (ModelOptions::target_length); its logits score every target position (per_position).
  int64_t default_target_length = 0;
};

// Every model, in the order `d5 models list` prints them.
std::vector<ZooModel> zoo_models();
// Adds a model (or replaces the one of the same name), e.g. from a user's program: build_model,
// `d5 net`, `d5 train` and `d5 models` then know it.
void register_model(ZooModel model);
// InvalidArgument listing the known names for an unknown one, or naming the option a model cannot
// take (an input too small for its pooling, a batch below 1).
Network build_model(const std::string& name, const ModelOptions& options = {});

// FLOPs of one forward pass: the sum of the reference operators' flops() over the nodes an
// executor runs (folded nodes excluded). Infers the network.
double forward_flops(const Network& network);

}  // namespace d5
