// MobileNetV2 (Sandler et al., 2018) as torchvision builds it at width 1.0: a stride-2 3x3 stem,
// seventeen inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1 linear projection; a
// residual connection where stride is 1 and the width stays), a 1x1 convolution to 1280 channels,
// global average pooling, dropout 0.2 and a linear classifier. ReLU6 is Clip(0, 6).
// 3,504,872 parameters (1000 classes).
#include <array>

#include "zoo_builder.h"

namespace d5::zoo {

namespace {

// Conv (no bias) + BN + ReLU6: torchvision's Conv2dNormActivation, whose children are .0 .1 .2.
Value conv_bn_relu6(Builder& b, const Value& x, const std::string& scope, int64_t out, int64_t kernel,
                    int64_t stride, int64_t groups = 1) {
  Value y = b.conv(x, scope + ".0", out, kernel, stride, (kernel - 1) / 2, false, groups);
  return b.relu6(b.batch_norm(y, scope + ".1"), scope + ".2");
}

Value inverted_residual(Builder& b, const Value& x, const std::string& scope, int64_t out, int64_t stride,
                        int64_t expand) {
  const int64_t in = x.shape[1], hidden = in * expand;
  Value y = x;
  int layer = 0;
  auto next = [&] { return scope + ".conv." + std::to_string(layer++); };
  if (expand != 1) y = conv_bn_relu6(b, y, next(), hidden, 1, 1);
  y = conv_bn_relu6(b, y, next(), hidden, 3, stride, hidden);
  y = b.conv(y, next(), out, 1, 1, 0, false);
  y = b.batch_norm(y, next());
  return stride == 1 && in == out ? b.add(x, y, scope + ".add") : y;
}

}  // namespace

Network build_mobilenet_v2(const ModelOptions& o) {
  struct Stage {
    int64_t expand, channels, blocks, stride;
  };
  static constexpr std::array<Stage, 7> stages = {{{1, 16, 1, 1},
                                                   {6, 24, 2, 2},
                                                   {6, 32, 3, 2},
                                                   {6, 64, 4, 2},
                                                   {6, 96, 3, 1},
                                                   {6, 160, 3, 2},
                                                   {6, 320, 1, 1}}};
  Builder b("mobilenet_v2", o);
  Value x = b.input(3, "C,H,W");
  x = conv_bn_relu6(b, x, "features.0", 32, 3, 2);
  int index = 1;
  for (const Stage& s : stages)
    for (int64_t i = 0; i < s.blocks; ++i)
      x = inverted_residual(b, x, "features." + std::to_string(index++), s.channels, i == 0 ? s.stride : 1,
                            s.expand);
  x = conv_bn_relu6(b, x, "features." + std::to_string(index), 1280, 1, 1);
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  x = b.dropout(x, "classifier.0", 0.2);
  return b.finish(b.linear(x, "classifier.1", o.classes));
}

}  // namespace d5::zoo
