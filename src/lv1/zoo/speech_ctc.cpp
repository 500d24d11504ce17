// A small speech recogniser for CTC training (in the manner of Deep Speech 2's front end, at a
// size that trains on two cores) on log-mel spectrograms [1, frames, bins]: two convolutions with
// batch norm and ReLU (5x5 stride 2, then 3x3 with stride 2 along the bins only, so the steps are
// ceil(frames / 2)), one bidirectional LSTM layer of 128 units over the steps, and a linear layer
// scoring every step over the classes, class 0 being CTC's blank. The default reads 3-second clips
// (149 frames of 40 bins, 75 steps) and scores 11 classes: the blank and the digits zero..nine.
//
// The convolutions keep their biases, as nn.Conv2d's default in the PyTorch twin
// (tests/speech/twin_speech_ctc.py), although batch norm's shift makes them redundant. 473,835
// parameters at the default: conv1 32 x 5 x 5 + 32 = 832, BN 64, conv2 32 x 32 x 3 x 3 + 32 =
// 9,248, BN 64, the LSTM per direction W 4 x 128 x 320 = 163,840, R 4 x 128 x 128 = 65,536, B 8 x
// 128 = 1,024 (230,400; two: 460,800), fc 256 x 11 + 11 = 2,827.
#include "zoo_builder.h"

namespace d5::zoo {

namespace {

constexpr int64_t kChannels = 32;
constexpr int64_t kHidden = 128;

Value conv_bn_relu(Builder& b, const Value& x, int index, Extent2d kernel, Extent2d stride, Extent2d pad) {
  const std::string i = std::to_string(index);
  const Value y = b.conv(x, "conv" + i, kChannels, kernel, stride, pad, true);
  return b.relu(b.batch_norm(y, "bn" + i), "relu" + i);
}

}  // namespace

Network build_speech_ctc(const ModelOptions& o) {
  Builder b("speech-ctc", o);
  Value x = b.input(3, "C,frames,bins");
  x = conv_bn_relu(b, x, 1, Extent2d{5, 5}, Extent2d{2, 2}, Extent2d{2, 2});
  x = conv_bn_relu(b, x, 2, Extent2d{3, 3}, Extent2d{1, 2}, Extent2d{1, 1});  // [N, 32, steps, bins']
  const int64_t batch = x.shape[0], steps = x.shape[2], features = x.shape[1] * x.shape[3];
  // Each step's channels and bins become its features: straight to the LSTM's sequence-first
  // layout, one transpose rather than a batch-first one and another for the LSTM.
  const Value seq_first =
      b.node("Transpose", "to_sequence_first", {x.name}, Shape{steps, batch, x.shape[1], x.shape[3]},
             Attributes{{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
  const Value frames = b.node("Reshape", "flatten_features", {seq_first.name, b.int64s({0, 0, features}).name},
                              Shape{steps, batch, features});
  const Value h = b.lstm_bidirectional(frames, "lstm", kHidden);  // [N, steps, 256]
  return b.finish_ctc(b.linear(h, "fc", o.classes));
}

}  // namespace d5::zoo
