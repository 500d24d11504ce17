#include "zoo_builder.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"

namespace d5::zoo {

namespace {

// Float attributes as ONNX stores them (f32), so an exported model imports to the same values.
constexpr double kNormEpsilon = static_cast<double>(1e-5f);
constexpr double kBatchNormMomentum = static_cast<double>(0.9f);

std::string number_text(double v) {
  std::string s = fmt::format("{}", v);
  for (char& c : s)
    if (c == '-') c = 'm';
  return s;
}

Shape with_last(Shape s, int64_t last) {
  s[s.rank() - 1] = last;
  return s;
}

}  // namespace

int64_t window_output(int64_t in, int64_t kernel, int64_t stride, int64_t pad, const std::string& layer) {
  D5_CHECK_ARG(
      in + 2 * pad >= kernel,
      "layer '{}': its input is {} wide (+{} padding on each side) but its window is {}: choose a larger "
      "--input-shape",
      layer, in, pad, kernel);
  return (in + 2 * pad - kernel) / stride + 1;
}

Builder::Builder(std::string model, const ModelOptions& options)
    : model_(std::move(model)), options_(options), net_(model_, 17) {
  // Reserved for the graph's interface (finish() and input() use them).
  used_ = {kZooLogits, kZooLabels, kZooLoss};
}

std::string Builder::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name); ++i) name = fmt::format("{}_{}", base, i);
  used_.insert(name);
  return name;
}

Value Builder::input(size_t rank, const std::string& what) {
  const auto& s = options_.input_shape;
  D5_CHECK_ARG(s.size() == rank, "model '{}' takes a per-sample input shape of {} extents ({}), got [{}]",
               model_, rank, what, fmt::join(s, ","));
  std::vector<int64_t> dims = {options_.batch};
  dims.insert(dims.end(), s.begin(), s.end());
  D5_CHECK(!used_.count(kZooInput), Internal, "model '{}' asked for two inputs", model_);
  used_.insert(kZooInput);
  Value v{kZooInput, Shape(dims)};
  net_.add_input(v.name, TensorDesc{DType::f32, v.shape});
  return v;
}

Value Builder::token_input() {
  const auto& s = options_.input_shape;
  D5_CHECK_ARG(s.size() == 1, "model '{}' takes a per-sample input of one extent (the number of tokens), got [{}]",
               model_, fmt::join(s, ","));
  return token_input(kZooInput, s[0]);
}

Value Builder::token_input(const std::string& name, int64_t length) {
  D5_CHECK(!used_.count(name), Internal, "model '{}' asked for input '{}' twice", model_, name);
  used_.insert(name);
  Value v{name, Shape{options_.batch, length}};
  net_.add_input(v.name, TensorDesc{DType::i64, v.shape});
  return v;
}

Value Builder::embedding(const Value& ids, const std::string& scope, int64_t dim) {
  D5_CHECK(options_.vocabulary > 0, Internal, "model '{}' builds an embedding without a vocabulary", model_);
  const std::string weight = uniform_param(scope + ".weight", Shape{options_.vocabulary, dim}, std::sqrt(3.0));
  return node("Gather", scope, {weight, ids.name}, Shape{ids.shape[0], ids.shape[1], dim},
              Attributes{{"axis", int64_t{0}}});
}

std::string Builder::uniform_param(const std::string& name, const Shape& shape, double bound) {
  const std::string n = fresh(name);
  Tensor t(DType::f32, shape);
  if (options_.initialize) {
    RngStream rng(options_.seed, "zoo/" + model_ + "/" + n);
    const auto b = static_cast<float>(bound);
    for (float& v : t.span<float>()) v = b * (2 * rng.uniform_float() - 1);
  }
  net_.feed_tensor(n, t, /*is_param=*/true);
  return n;
}

std::string Builder::filled_tensor(const std::string& name, const Shape& shape, float value, bool is_param) {
  const std::string n = fresh(name);
  Tensor t(DType::f32, shape);
  if (value != 0) t.fill(value);
  net_.feed_tensor(n, t, is_param);
  return n;
}

Value Builder::constant(const std::string& name, const Tensor& value) {
  // A Constant node, not an initializer: formats such as ONNX do not say which initializers are
  // trainable, and an importer would take a float initializer feeding Mul for a parameter.
  if (!used_.count(name)) {
    used_.insert(name);
    net_.add_node({name, "Constant", "", Attributes{{"value", value}}, {}, {name}});
  }
  return {name, value.shape()};
}

Value Builder::scalar(float v) {
  return constant("const_f32_" + number_text(v), Tensor::from_values<float>(Shape{}, {v}));
}

Value Builder::int64s(const std::vector<int64_t>& values) {
  std::vector<std::string> parts;
  for (int64_t v : values) parts.push_back(number_text(static_cast<double>(v)));
  Tensor t(DType::i64, Shape{static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data_as<int64_t>());
  return constant(fmt::format("const_i64_{}", fmt::join(parts, "_")), t);
}

Value Builder::node(const std::string& op_type, const std::string& scope,
                    const std::vector<std::string>& inputs, Shape out_shape, Attributes attrs) {
  const std::string name = fresh(scope);
  net_.add_node({name, op_type, "", std::move(attrs), inputs, {name}});
  return {name, std::move(out_shape)};
}

Value Builder::conv(const Value& x, const std::string& scope, int64_t out_channels, int64_t kernel,
                    int64_t stride, int64_t pad, bool bias, int64_t groups) {
  return conv(x, scope, out_channels, Extent2d{kernel, kernel}, Extent2d{stride, stride}, Extent2d{pad, pad}, bias,
              groups);
}

Value Builder::conv(const Value& x, const std::string& scope, int64_t out_channels, Extent2d kernel,
                    Extent2d stride, Extent2d pad, bool bias, int64_t groups) {
  const int64_t in_channels = x.shape[1];
  D5_CHECK(in_channels % groups == 0 && out_channels % groups == 0, Internal,
           "layer '{}': {} -> {} channels in {} groups", scope, in_channels, out_channels, groups);
  const int64_t fan_in = in_channels / groups * kernel.h * kernel.w;
  const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
  std::vector<std::string> inputs = {
      x.name,
      uniform_param(scope + ".weight", Shape{out_channels, in_channels / groups, kernel.h, kernel.w}, bound)};
  if (bias) inputs.push_back(uniform_param(scope + ".bias", Shape{out_channels}, bound));
  Shape out{x.shape[0], out_channels, window_output(x.shape[2], kernel.h, stride.h, pad.h, scope),
            window_output(x.shape[3], kernel.w, stride.w, pad.w, scope)};
  Attributes a{{"kernel_shape", std::vector<int64_t>{kernel.h, kernel.w}},
               {"strides", std::vector<int64_t>{stride.h, stride.w}},
               {"pads", std::vector<int64_t>{pad.h, pad.w, pad.h, pad.w}},
               {"group", groups}};
  return node("Conv", scope, inputs, out, std::move(a));
}

Value Builder::batch_norm(const Value& x, const std::string& scope) {
  const Shape c{x.shape[1]};
  std::vector<std::string> inputs = {x.name, filled_tensor(scope + ".weight", c, 1, true),
                                     filled_tensor(scope + ".bias", c, 0, true),
                                     filled_tensor(scope + ".running_mean", c, 0, false),
                                     filled_tensor(scope + ".running_var", c, 1, false)};
  // PyTorch's momentum 0.1 weighs the new batch; ONNX's momentum weighs the running value.
  Attributes a{{"epsilon", kNormEpsilon}, {"momentum", kBatchNormMomentum}};
  if (!options_.training) return node("BatchNormalization", scope, inputs, x.shape, std::move(a));
  // Training mode has three outputs in ONNX (its shape inference insists); the updated running
  // statistics are not asked for, so their names stay empty.
  a.set("training_mode", int64_t{1});
  const std::string name = fresh(scope);
  net_.add_node({name, "BatchNormalization", "", std::move(a), inputs, {name, "", ""}});
  return {name, x.shape};
}

Value Builder::linear(const Value& x, const std::string& scope, int64_t out_features, bool bias) {
  const int64_t in_features = x.shape[x.shape.rank() - 1];
  const double bound = 1 / std::sqrt(static_cast<double>(in_features));
  if (x.shape.rank() == 2) {
    std::vector<std::string> inputs = {
        x.name, uniform_param(scope + ".weight", Shape{out_features, in_features}, bound)};
    if (bias) inputs.push_back(uniform_param(scope + ".bias", Shape{out_features}, bound));
    return node("Gemm", scope, inputs, Shape{x.shape[0], out_features}, Attributes{{"transB", int64_t{1}}});
  }
  // PyTorch's exporter also turns a Linear on 3-D input into MatMul with the transposed weight.
  const std::string w = uniform_param(scope + ".weight", Shape{in_features, out_features}, bound);
  Value y = node("MatMul", scope + ".matmul", {x.name, w}, with_last(x.shape, out_features));
  if (!bias) return y;
  const std::string b = uniform_param(scope + ".bias", Shape{out_features}, bound);
  return node("Add", scope, {y.name, b}, y.shape);
}

Value Builder::layer_norm(const Value& x, const std::string& scope) {
  const Shape c{x.shape[x.shape.rank() - 1]};
  std::vector<std::string> inputs = {x.name, filled_tensor(scope + ".weight", c, 1, true),
                                     filled_tensor(scope + ".bias", c, 0, true)};
  return node("LayerNormalization", scope, inputs, x.shape,
              Attributes{{"axis", int64_t{-1}}, {"epsilon", kNormEpsilon}});
}

void Builder::lstm_node(const Value& x, const std::string& scope, int64_t hidden, int64_t directions,
                        const std::string& y, const std::string& y_h) {
  const int64_t features = x.shape[2];
  const double bound = 1 / std::sqrt(static_cast<double>(hidden));
  // ONNX packs PyTorch's weight_ih/weight_hh/bias_ih+bias_hh as W, R, B, one row per direction
  // (the backward direction second, as PyTorch's *_reverse parameters).
  std::vector<std::string> inputs = {x.name,
                                     uniform_param(scope + ".W", Shape{directions, 4 * hidden, features}, bound),
                                     uniform_param(scope + ".R", Shape{directions, 4 * hidden, hidden}, bound),
                                     uniform_param(scope + ".B", Shape{directions, 8 * hidden}, bound)};
  Attributes a{{"hidden_size", hidden}};
  if (directions == 2) a.set("direction", std::string("bidirectional"));
  net_.add_node({fresh(scope), "LSTM", "", std::move(a), inputs, {y, y_h}});
}

Value Builder::lstm_last_hidden(const Value& x, const std::string& scope, int64_t hidden) {
  const std::string y_h = fresh(scope + ".h_n");
  lstm_node(x, scope, hidden, 1, "", y_h);
  return node("Squeeze", scope + ".last", {y_h, int64s({0}).name}, Shape{x.shape[1], hidden});
}

Value Builder::lstm_sequence(const Value& x, const std::string& scope, int64_t hidden) {
  const std::string y = fresh(scope + ".y");  // [seq, directions, batch, hidden]
  lstm_node(x, scope, hidden, 1, y, "");
  return node("Squeeze", scope + ".steps", {y, int64s({1}).name}, Shape{x.shape[0], x.shape[1], hidden});
}

Value Builder::lstm_bidirectional(const Value& x, const std::string& scope, int64_t hidden) {
  const int64_t seq = x.shape[0], batch = x.shape[1];
  const std::string y = fresh(scope + ".y");  // [seq, 2, batch, hidden]
  lstm_node(x, scope, hidden, 2, y, "");
  // Batch first with the direction axis next to the units, so merging the last two axes puts
  // each step's forward state before its backward one.
  const Value steps = node("Transpose", scope + ".batch_first", {y}, Shape{batch, seq, 2, hidden},
                           Attributes{{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
  return node("Reshape", scope + ".concat", {steps.name, int64s({0, 0, 2 * hidden}).name},
              Shape{batch, seq, 2 * hidden});
}

Value Builder::relu(const Value& x, const std::string& scope) {
  return node("Relu", scope, {x.name}, x.shape);
}

Value Builder::relu6(const Value& x, const std::string& scope) {
  return node("Clip", scope, {x.name, scalar(0).name, scalar(6).name}, x.shape);
}

Value Builder::gelu(const Value& x, const std::string& scope) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  const auto k = static_cast<float>(std::sqrt(2 / std::numbers::pi));
  Value x2 = mul(x, x, scope + ".x2");
  Value x3 = mul(x2, x, scope + ".x3");
  Value inner = add(x, mul(x3, scalar(0.044715f), scope + ".cubic"), scope + ".inner");
  Value t = node("Tanh", scope + ".tanh", {mul(inner, scalar(k), scope + ".scaled").name}, x.shape);
  Value half_x = mul(x, scalar(0.5f), scope + ".half");
  return mul(half_x, add(t, scalar(1), scope + ".one_plus"), scope);
}

Value Builder::max_pool(const Value& x, const std::string& scope, int64_t kernel, int64_t stride,
                        int64_t pad) {
  Shape out{x.shape[0], x.shape[1], window_output(x.shape[2], kernel, stride, pad, scope),
            window_output(x.shape[3], kernel, stride, pad, scope)};
  Attributes a{{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
               {"strides", std::vector<int64_t>{stride, stride}},
               {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  return node("MaxPool", scope, {x.name}, out, std::move(a));
}

Value Builder::global_avg_pool(const Value& x, const std::string& scope) {
  return node("GlobalAveragePool", scope, {x.name}, Shape{x.shape[0], x.shape[1], 1, 1});
}

Value Builder::adaptive_avg_pool(const Value& x, const std::string& scope, int64_t out) {
  const int64_t h = x.shape[2], w = x.shape[3];
  if (h == out && w == out) return x;
  const Shape target{x.shape[0], x.shape[1], out, out};
  if (h == 1 && w == 1) return node("Expand", scope, {x.name, int64s(target.dims()).name}, target);
  D5_CHECK_ARG(
      h == w && h % out == 0,
      "model '{}': layer '{}' pools a {}x{} feature map to {}x{}, which needs a square map whose side is "
      "a multiple of {} (or 1); choose another --input-shape",
      model_, scope, h, w, out, out, out);
  const int64_t k = h / out;
  Attributes a{{"kernel_shape", std::vector<int64_t>{k, k}}, {"strides", std::vector<int64_t>{k, k}}};
  return node("AveragePool", scope, {x.name}, target, std::move(a));
}

Value Builder::flatten(const Value& x, const std::string& scope) {
  int64_t rest = 1;
  for (size_t i = 1; i < x.shape.rank(); ++i) rest *= x.shape[i];
  return node("Flatten", scope, {x.name}, Shape{x.shape[0], rest}, Attributes{{"axis", int64_t{1}}});
}

Value Builder::dropout(const Value& x, const std::string& scope, double ratio) {
  if (!options_.training || ratio == 0) return x;
  Tensor training = Tensor::from_values<bool>(Shape{}, {true});
  const std::string mode = constant("const_training_true", training).name;
  Attributes a{{"seed", static_cast<int64_t>(options_.seed & 0x7fffffffffffffff)}};
  return node("Dropout", scope, {x.name, scalar(static_cast<float>(ratio)).name, mode}, x.shape,
              std::move(a));
}

Value Builder::add(const Value& a, const Value& b, const std::string& scope) {
  return node("Add", scope, {a.name, b.name}, a.shape.rank() >= b.shape.rank() ? a.shape : b.shape);
}

Value Builder::mul(const Value& a, const Value& b, const std::string& scope) {
  return node("Mul", scope, {a.name, b.name}, a.shape.rank() >= b.shape.rank() ? a.shape : b.shape);
}

std::string Builder::name_output(const Value& logits) {
  // The last node writes "logits" directly, so the graph names its output for any consumer.
  const std::string out = kZooLogits;
  net_.replace_uses(logits.name, out);
  Node& last = net_.mutable_node(net_.producer(logits.name)->name);
  for (auto& o : last.outputs)
    if (o == logits.name) o = out;
  net_.add_output(out);
  return out;
}

Network Builder::finish(const Value& logits) {
  D5_CHECK(logits.shape == (Shape{options_.batch, options_.classes}), Internal,
           "model '{}' produced logits of shape {}", model_, logits.shape.to_string());
  const std::string out = name_output(logits);
  if (options_.with_loss) {
    net_.add_input(kZooLabels, TensorDesc{DType::i64, Shape{options_.batch}});
    net_.add_node({kZooLoss,
                   "SoftmaxCrossEntropyLoss",
                   "",
                   Attributes{{"reduction", std::string("mean")}},
                   {out, kZooLabels},
                   {kZooLoss}});
    net_.add_output(kZooLoss);
  }
  return std::move(net_);
}

Network Builder::finish_per_position(const Value& logits) {
  const Shape& s = logits.shape;
  D5_CHECK(s.rank() == 3 && s[0] == options_.batch && s[2] == options_.vocabulary, Internal,
           "model '{}' produced per-position logits of shape {} for vocabulary {}", model_, s.to_string(),
           options_.vocabulary);
  const std::string out = name_output(logits);
  if (options_.with_loss) {
    // As the sequence-ce loss head: classes to axis 1, positions labelled -100 (PyTorch's
    // ignore_index, the loss heads' default) skipped.
    const std::string scores = std::string(kZooLoss) + "/scores";
    net_.add_node({scores, "Transpose", "", Attributes{{"perm", std::vector<int64_t>{0, 2, 1}}}, {out}, {scores}});
    net_.add_input(kZooLabels, TensorDesc{DType::i64, Shape{s[0], s[1]}});
    net_.add_node({kZooLoss,
                   "SoftmaxCrossEntropyLoss",
                   "",
                   Attributes{{"reduction", std::string("mean")}, {"ignore_index", int64_t{-100}}},
                   {scores, kZooLabels},
                   {kZooLoss}});
    net_.add_output(kZooLoss);
  }
  return std::move(net_);
}

Network Builder::finish_ctc(const Value& scores) {
  const Shape& s = scores.shape;
  D5_CHECK(s.rank() == 3 && s[0] == options_.batch && s[2] == options_.classes, Internal,
           "model '{}' produced per-step scores of shape {} for {} classes", model_, s.to_string(),
           options_.classes);
  const std::string out = name_output(scores);
  if (options_.with_loss) append_ctc_loss(out, s);
  return std::move(net_);
}

Network Builder::finish_ssd(const Value& prediction, const Tensor& anchors) {
  const Shape& s = prediction.shape;
  D5_CHECK(s.rank() == 3 && s[0] == options_.batch && s[2] == 4 + options_.classes + 1 &&
               anchors.shape() == Shape({s[1], 4}),
           Internal, "model '{}' produced a prediction of shape {} with anchors {} for {} classes", model_,
           s.to_string(), anchors.shape().to_string(), options_.classes);
  const std::string out = name_output(prediction);
  // An initializer rather than a Constant node: the ssd loss head and the map measures read it by
  // name, and it feeds no differentiable input, so an importer keeps it a constant.
  net_.feed_tensor(kZooAnchors, anchors, false);
  if (options_.with_loss) {
    const int64_t m = kZooDetectionObjects;
    net_.add_input(kZooLabels, TensorDesc{DType::i64, Shape{options_.batch, m}});
    net_.add_input(kZooBoxes, TensorDesc{DType::f32, Shape{options_.batch, m, 4}});
    net_.add_node({kZooLoss, "SsdLoss", "", Attributes{{"ignore_index", int64_t{-100}}},
                   {out, kZooAnchors, kZooBoxes, kZooLabels}, {kZooLoss}});
    net_.add_output(kZooLoss);
  }
  return std::move(net_);
}

// The operators of Level 2's ctc loss head (src/lv2/train/loss_head.cpp; its constants are
// Constant nodes here, as the zoo's others), so a zoo model trains the same with with_loss as
// with `d5 train --loss ctc`: CTCLoss wants [steps, batch, classes] log-probabilities, every input
// as long as the scores, and each target's length, counted from its labels before the -100
// padding. Mean per target label; zero_infinity, so a target too long for the steps costs
// nothing instead of an infinite loss.
void Builder::append_ctc_loss(const std::string& scores, const Shape& shape) {
  const int64_t batch = shape[0], steps = shape[1];
  const std::string p = std::string(kZooLoss) + "/";
  const Value time_first = node("Transpose", p + "steps", {scores}, Shape{steps, batch, shape[2]},
                                Attributes{{"perm", std::vector<int64_t>{1, 0, 2}}});
  const Value log_probs =
      node("LogSoftmax", p + "log_probs", {time_first.name}, time_first.shape, Attributes{{"axis", int64_t{2}}});
  const Shape labels{batch, kZooCtcLabelLength};
  net_.add_input(kZooLabels, TensorDesc{DType::i64, labels});
  const Value ignore = constant(p + "ignore", Tensor::from_values<int64_t>(Shape{}, {-100}));
  const Value padding = node("Equal", p + "padding", {kZooLabels, ignore.name}, labels);
  const Value labelled = node("Not", p + "labelled", {padding.name}, labels);
  const Value counted = node("Cast", p + "labelled_i64", {labelled.name}, labels,
                             Attributes{{"to", int64_t{7}}});  // 7: ONNX's INT64
  const Value target_lengths = node("ReduceSum", p + "target_lengths", {counted.name, int64s({1}).name},
                                    Shape{batch}, Attributes{{"keepdims", int64_t{0}}});
  Tensor lengths(DType::i64, Shape{batch});
  lengths.fill(static_cast<double>(steps));
  const Value input_lengths = constant(p + "input_lengths", lengths);
  net_.add_node({kZooLoss, "CTCLoss", "",
                 Attributes{{"blank", int64_t{0}}, {"reduction", std::string("mean")}, {"zero_infinity", int64_t{1}}},
                 {log_probs.name, kZooLabels, input_lengths.name, target_lengths.name},
                 {kZooLoss}});
  net_.add_output(kZooLoss);
}

}  // namespace d5::zoo
