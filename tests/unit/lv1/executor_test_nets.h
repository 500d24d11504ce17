#pragma once
// Small hand-built networks and synthetic data for the executor tests.
#include <cmath>
#include <map>
#include <string>

#include "deep500/net/network.h"
#include "deep500/core/rng.h"

namespace d5::test {

// Uniform in [-scale, scale], seeded by name so every tensor has its own stream.
inline Tensor random_tensor(const TensorDesc& d, const std::string& name, double scale = 1.0,
                            uint64_t seed = 7) {
  Tensor t(d);
  RngStream rng(seed, name);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.uniform(-scale, scale));
  return t;
}

inline void add_param(Network& net, const std::string& name, DType t, const Shape& shape, int64_t fan_in) {
  net.feed_tensor(name, random_tensor(TensorDesc{t, shape}, name, 1.0 / std::sqrt(static_cast<double>(fan_in))),
                  true);
}

// Labels of a "teacher": argmax over classes of x . T for a fixed random T, so a network that can
// represent a linear map can learn them.
inline Tensor teacher_labels(const Tensor& x, int64_t classes) {
  const int64_t n = x.shape()[0], features = x.numel() / n;
  const Tensor teacher = random_tensor(TensorDesc{DType::f64, Shape{features, classes}}, "teacher");
  Tensor labels(DType::i64, Shape{n});
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double best_v = -1e300;
    for (int64_t c = 0; c < classes; ++c) {
      double v = 0;
      for (int64_t f = 0; f < features; ++f) v += x.get(i * features + f) * teacher.get(f * classes + c);
      if (v > best_v) best_v = v, best = c;
    }
    labels.set(i, static_cast<double>(best));
  }
  return labels;
}

// x[N, F] -> Gemm -> Relu -> Gemm -> logits; loss = SoftmaxCrossEntropyLoss(logits, labels).
inline Network mlp(int64_t batch, int64_t features, int64_t hidden, int64_t classes, DType t = DType::f32) {
  Network net("mlp");
  net.add_input("x", TensorDesc{t, Shape{batch, features}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{batch}});
  add_param(net, "W1", t, Shape{hidden, features}, features);
  add_param(net, "b1", t, Shape{hidden}, features);
  add_param(net, "W2", t, Shape{classes, hidden}, hidden);
  add_param(net, "b2", t, Shape{classes}, hidden);
  net.add_node({"fc1", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"x", "W1", "b1"}, {"h"}});
  net.add_node({"relu", "Relu", "", {}, {"h"}, {"a"}});
  net.add_node({"fc2", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"a", "W2", "b2"}, {"logits"}});
  net.add_node({"loss", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss_value"}});
  net.add_output("logits");
  return net;
}

// x[N, 1, 8, 8] -> Conv 3x3 (4 channels) -> BatchNormalization -> Relu -> MaxPool 2x2 -> Flatten
// -> Gemm -> logits -> Softmax -> probs; loss = SoftmaxCrossEntropyLoss(logits, labels).
inline Network cnn(int64_t batch, int64_t classes, DType t = DType::f32) {
  Network net("cnn");
  net.add_input("x", TensorDesc{t, Shape{batch, 1, 8, 8}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{batch}});
  add_param(net, "conv_w", t, Shape{4, 1, 3, 3}, 9);
  add_param(net, "conv_b", t, Shape{4}, 9);
  Tensor scale(TensorDesc{t, Shape{4}}), mean(TensorDesc{t, Shape{4}}), var(TensorDesc{t, Shape{4}});
  scale.fill(1.0);
  var.fill(1.0);
  net.feed_tensor("bn_scale", scale, true);
  add_param(net, "bn_bias", t, Shape{4}, 4);
  net.feed_tensor("bn_mean", random_tensor(TensorDesc{t, Shape{4}}, "bn_mean", 0.1));  // running statistics:
  net.feed_tensor("bn_var", var);                                                      // constants
  add_param(net, "fc_w", t, Shape{classes, 64}, 64);
  add_param(net, "fc_b", t, Shape{classes}, 64);
  net.add_node({"conv",
                "Conv",
                "",
                Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                {"x", "conv_w", "conv_b"},
                {"c"}});
  net.add_node({"bn", "BatchNormalization", "", {}, {"c", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"n"}});
  net.add_node({"relu", "Relu", "", {}, {"n"}, {"r"}});
  net.add_node(
      {"pool",
       "MaxPool",
       "",
       Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
       {"r"},
       {"p"}});
  net.add_node({"flatten", "Flatten", "", {}, {"p"}, {"f"}});
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"f", "fc_w", "fc_b"}, {"logits"}});
  net.add_node({"softmax", "Softmax", "", {}, {"logits"}, {"probs"}});
  net.add_node({"loss", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss_value"}});
  net.add_output("probs");
  return net;
}

// A residual block whose input fans out to two consumers:
// h = Gemm(x, A); u = Gemm(Relu(h), B); s = Add(h, u); logits = Gemm(Tanh(s), C).
inline Network residual(int64_t batch, int64_t width, int64_t classes, DType t = DType::f32) {
  Network net("residual");
  net.add_input("x", TensorDesc{t, Shape{batch, width}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{batch}});
  add_param(net, "A", t, Shape{width, width}, width);
  add_param(net, "B", t, Shape{width, width}, width);
  add_param(net, "C", t, Shape{classes, width}, width);
  net.add_node({"mm_a", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"x", "A"}, {"h"}});
  net.add_node({"relu", "Relu", "", {}, {"h"}, {"r"}});
  net.add_node({"mm_b", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"r", "B"}, {"u"}});
  net.add_node({"add", "Add", "", {}, {"h", "u"}, {"s"}});
  net.add_node({"tanh", "Tanh", "", {}, {"s"}, {"ts"}});
  net.add_node({"mm_c", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"ts", "C"}, {"logits"}});
  net.add_node({"loss", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss_value"}});
  net.add_output("logits");
  return net;
}

// What PyTorch exports for x.view(x.size(0), -1) between a convolution and a linear layer: a
// Shape -> Gather -> Unsqueeze -> Concat chain that inference folds into a constant shape.
inline Network shape_chain(int64_t batch, int64_t classes, DType t = DType::f32) {
  Network net("shape_chain");
  net.add_input("x", TensorDesc{t, Shape{batch, 2, 4, 4}});
  net.add_input("labels", TensorDesc{DType::i64, Shape{batch}});
  add_param(net, "conv_w", t, Shape{3, 2, 3, 3}, 18);
  add_param(net, "fc_w", t, Shape{classes, 12}, 12);
  net.feed_tensor("zero", Tensor::from_values<int64_t>(Shape{}, {0}));
  net.feed_tensor("minus1", Tensor::from_values<int64_t>(Shape{1}, {-1}));
  net.feed_tensor("axes0", Tensor::from_values<int64_t>(Shape{1}, {0}));
  net.add_node({"conv", "Conv", "", {}, {"x", "conv_w"}, {"c"}});  // [N, 3, 2, 2]
  net.add_node({"shape", "Shape", "", {}, {"c"}, {"s"}});
  net.add_node({"gather", "Gather", "", Attributes{{"axis", int64_t{0}}}, {"s", "zero"}, {"n"}});
  net.add_node({"unsq", "Unsqueeze", "", {}, {"n", "axes0"}, {"n1"}});
  net.add_node({"concat", "Concat", "", Attributes{{"axis", int64_t{0}}}, {"n1", "minus1"}, {"target"}});
  net.add_node({"reshape", "Reshape", "", {}, {"c", "target"}, {"flat"}});
  net.add_node({"fc", "Gemm", "", Attributes{{"transB", int64_t{1}}}, {"flat", "fc_w"}, {"logits"}});
  net.add_node({"loss", "SoftmaxCrossEntropyLoss", "", {}, {"logits", "labels"}, {"loss_value"}});
  net.add_output("logits");
  return net;
}

// Feeds for a network with inputs "x" (uniform in [-1, 1]) and "labels" (the teacher's).
inline std::map<std::string, Tensor> feeds_for(const Network& net, int64_t classes,
                                               const std::string& seed_name = "x") {
  const TensorDesc& xd = net.desc("x");
  Tensor x = random_tensor(xd, seed_name);
  return {{"x", x}, {"labels", teacher_labels(x, classes)}};
}

// Sets b1[0] of the MLP so that h[0, 0] = x[0, :] . W1[0, :] + b1[0] equals `target` for these feeds
// (a pre-activation placed at a kink).
inline void set_first_preactivation(Network& net, const std::map<std::string, Tensor>& feeds, double target) {
  const Tensor x = feeds.at("x"), w1 = net.fetch_tensor("W1");
  Tensor b1 = net.fetch_tensor("b1").clone();
  double h = b1.get(0);
  for (int64_t k = 0; k < w1.shape()[1]; ++k) h += x.get(k) * w1.get(k);
  b1.set(0, b1.get(0) - h + target);
  net.feed_tensor("b1", b1, true);
}

}  // namespace d5::test
