#pragma once
// The layer vocabulary the zoo's model families are written in. Each call appends ONNX nodes to
// one Network and returns the output tensor with its shape, so builders can size the next layer
// (channels, flattened features) without running shape inference on a half-built graph.
//
// Parameter names follow PyTorch's state_dict ("layer1.0.conv1.weight", "bn1.running_mean") so a
// zoo model can be compared tensor by tensor with its torchvision twin. Initialization follows
// PyTorch's layer defaults: a Conv/Linear weight is Kaiming-uniform with a = sqrt(5), i.e.
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and so is its bias; normalization scales are 1 and shifts 0;
// running statistics start at mean 0, variance 1. Each parameter draws from its own Philox stream
// (seed, "zoo/<model>/<parameter>"), so adding a layer never changes another layer's values.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "deep500/net/model_zoo.h"
#include "deep500/net/network.h"

namespace d5::zoo {

struct Value {
  std::string name;
  Shape shape;
};

// A window's extent along height and width: a kernel, a stride, or padding (the same before and
// after, on each axis).
struct Extent2d {
  int64_t h, w;
};

class Builder {
 public:
  // `options` must be resolved (classes and input_shape filled in).
  Builder(std::string model, const ModelOptions& options);

  const ModelOptions& options() const { return options_; }
  const std::string& model() const { return model_; }

  // The graph input "input" of [batch, ...input_shape]; InvalidArgument unless the per-sample
  // shape has `rank` extents (`what` describes them in the message: "C,H,W").
  Value input(size_t rank, const std::string& what);
  // The graph input "input" of token ids, i64 [batch, length]; InvalidArgument unless the
  // per-sample shape is one extent (the length).
  Value token_input();
  // A further input of token ids, i64 [batch, length] (a decoder's input).
  Value token_input(const std::string& name, int64_t length);

  // --- layers; `scope` is the PyTorch module path, used for node and parameter names ---
  Value conv(const Value& x, const std::string& scope, int64_t out_channels, int64_t kernel, int64_t stride,
             int64_t pad, bool bias, int64_t groups = 1);
  // The same with a window that need not be square (a spectrogram's frames and coefficients).
  Value conv(const Value& x, const std::string& scope, int64_t out_channels, Extent2d kernel, Extent2d stride,
             Extent2d pad, bool bias, int64_t groups = 1);
  Value batch_norm(const Value& x, const std::string& scope);
  // [N, in] -> Gemm; [..., in] (rank 3+) -> MatMul with the weight stored [in, out], then Add.
  Value linear(const Value& x, const std::string& scope, int64_t out_features, bool bias = true);
  Value layer_norm(const Value& x, const std::string& scope);
  // LSTM over [seq, batch, features] with hidden_size units; returns the last hidden state
  // [batch, hidden]. Weights as PyTorch: U(-1/sqrt(hidden), 1/sqrt(hidden)).
  Value lstm_last_hidden(const Value& x, const std::string& scope, int64_t hidden);
  // The same layer's hidden state after every step, [seq, batch, hidden].
  Value lstm_sequence(const Value& x, const std::string& scope, int64_t hidden);
  // A bidirectional layer (ONNX direction="bidirectional") over [seq, batch, features]; returns
  // both directions' hidden states at every step batch first, forward then backward: [batch, seq,
  // 2 * hidden], the features PyTorch's nn.LSTM(bidirectional=True, batch_first=True) gives.
  Value lstm_bidirectional(const Value& x, const std::string& scope, int64_t hidden);
  // PyTorch's nn.Embedding(vocabulary, dim) on ids [batch, length] -> [batch, length, dim]: Gather
  // on the rows of a [vocabulary, dim] weight drawn with unit variance (U(-sqrt 3, sqrt 3)).
  Value embedding(const Value& ids, const std::string& scope, int64_t dim);

  Value relu(const Value& x, const std::string& scope);
  Value relu6(const Value& x, const std::string& scope);  // Clip(0, 6)
  // PyTorch's gelu(approximate="tanh") from Mul/Add/Tanh: opset 17 has no Gelu operator.
  Value gelu(const Value& x, const std::string& scope);
  Value max_pool(const Value& x, const std::string& scope, int64_t kernel, int64_t stride, int64_t pad);
  Value global_avg_pool(const Value& x, const std::string& scope);
  // PyTorch's AdaptiveAvgPool2d(out) where the ONNX set can express it exactly: the same size
  // (nothing to do), an integer factor smaller (AveragePool) or 1x1 (Expand replicates);
  // InvalidArgument naming the input size otherwise.
  Value adaptive_avg_pool(const Value& x, const std::string& scope, int64_t out);
  Value flatten(const Value& x, const std::string& scope);  // [N, ...] -> [N, rest]
  // Identity in inference mode (no node, as PyTorch's eval-mode export); Dropout in training.
  Value dropout(const Value& x, const std::string& scope, double ratio);
  Value add(const Value& a, const Value& b, const std::string& scope);
  Value mul(const Value& a, const Value& b, const std::string& scope);

  // Any other node with one output; the caller states the output shape.
  Value node(const std::string& op_type, const std::string& scope, const std::vector<std::string>& inputs,
             Shape out_shape, Attributes attrs = {});
  // A constant (a Constant node, folded by inference), shared by name.
  Value constant(const std::string& name, const Tensor& value);
  Value scalar(float v);                             // an f32 scalar constant
  Value int64s(const std::vector<int64_t>& values);  // a 1-D i64 constant

  // Marks `logits` as the output "logits", adds the loss when asked, and hands the network over.
  Network finish(const Value& logits);
  // The same for a model that scores every position, logits [batch, positions, vocabulary] (a
  // language model): the loss reads labels [batch, positions], -100 where a position has none.
  Network finish_per_position(const Value& logits);
  // The same for per-step class scores [batch, steps, classes] trained with CTC (class 0 the
  // blank): the loss is LogSoftmax and CTCLoss, as Level 2's ctc loss head appends them, reading
  // label sequences [batch, kZooCtcLabelLength] padded with -100.
  Network finish_ctc(const Value& scores);
  // The same for a single-shot detector's prediction [batch, anchors, 4 + classes + 1] (box
  // offsets, then class scores with the background first): its anchors [anchors, 4] become the
  // constant "anchors", and the loss is Level 2's ssd head's SsdLoss, reading labels [batch,
  // kZooDetectionObjects] (-100 on padding rows) and "boxes" [batch, kZooDetectionObjects, 4].
  Network finish_ssd(const Value& prediction, const Tensor& anchors);

 private:
  std::string name_output(const Value& logits);  // renames logits to "logits", marks it an output
  // One LSTM node over x with PyTorch's initialisation, one or two directions; names its outputs
  // Y and Y_h ("" to omit).
  void lstm_node(const Value& x, const std::string& scope, int64_t hidden, int64_t directions,
                 const std::string& y, const std::string& y_h);
  void append_ctc_loss(const std::string& scores, const Shape& shape);
  // A node/tensor name not used yet: `base`, else base_1, base_2, ...
  std::string fresh(const std::string& base);
  // A parameter of `shape` drawn from U(-bound, bound) (zeros when !initialize).
  std::string uniform_param(const std::string& name, const Shape& shape, double bound);
  std::string filled_tensor(const std::string& name, const Shape& shape, float value, bool is_param);

  std::string model_;
  ModelOptions options_;
  Network net_;
  std::set<std::string> used_;
};

// Output extent of a convolution or pooling window along one axis (floor mode, dilation 1);
// InvalidArgument naming the layer when the input is smaller than the window.
int64_t window_output(int64_t in, int64_t kernel, int64_t stride, int64_t pad, const std::string& layer);

// The families: one file each (src/lv1/zoo/*.cpp).
Network build_lenet5(const ModelOptions& o);
Network build_mlp(const ModelOptions& o);
Network build_alexnet(const ModelOptions& o);
Network build_vgg(const std::string& name, const ModelOptions& o);     // vgg11, vgg16
Network build_resnet(const std::string& name, const ModelOptions& o);  // resnet18 ... resnet152
Network build_resnet_cifar(const std::string& name, int depth, const ModelOptions& o);
Network build_wide_resnet(const std::string& name, int depth, int width, const ModelOptions& o);
Network build_mobilenet_v2(const ModelOptions& o);
Network build_lstm_classifier(const ModelOptions& o);
Network build_transformer(const ModelOptions& o);
Network build_text_lstm(const ModelOptions& o);
Network build_text_transformer(const ModelOptions& o);
Network build_text_lstm_lm(const ModelOptions& o);
Network build_kws_dscnn(const ModelOptions& o);
Network build_speech_ctc(const ModelOptions& o);
Network build_seq2seq_transformer(const ModelOptions& o);
Network build_detector_ssd(const ModelOptions& o);

}  // namespace d5::zoo
