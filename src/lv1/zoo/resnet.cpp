// ResNets for ImageNet (He et al., 2016) as torchvision builds them: a 7x7 stem, four stages of
// basic blocks (ResNet-18/34) or bottleneck blocks (ResNet-50/101/152, stride on the 3x3
// convolution as in torchvision's "v1.5"), projection shortcuts (1x1 convolution + batch norm)
// where the shape changes, global average pooling and a linear classifier. Convolutions have no
// bias. ResNet-18: 11,689,512 parameters; ResNet-50: 25,557,032 (1000 classes).
#include <array>
#include <map>

#include "zoo_builder.h"

namespace d5::zoo {

namespace {

struct ResNetConfig {
  bool bottleneck;
  std::array<int, 4> blocks;
};

Value downsample(Builder& b, const Value& x, const std::string& scope, int64_t out, int64_t stride) {
  return b.batch_norm(b.conv(x, scope + ".downsample.0", out, 1, stride, 0, false), scope + ".downsample.1");
}

Value basic_block(Builder& b, const Value& x, const std::string& scope, int64_t planes, int64_t stride) {
  Value y = b.relu(b.batch_norm(b.conv(x, scope + ".conv1", planes, 3, stride, 1, false), scope + ".bn1"),
                   scope + ".relu");
  y = b.batch_norm(b.conv(y, scope + ".conv2", planes, 3, 1, 1, false), scope + ".bn2");
  const bool project = stride != 1 || x.shape[1] != planes;
  Value shortcut = project ? downsample(b, x, scope, planes, stride) : x;
  return b.relu(b.add(y, shortcut, scope + ".add"), scope + ".relu");
}

Value bottleneck_block(Builder& b, const Value& x, const std::string& scope, int64_t planes, int64_t stride) {
  constexpr int64_t kExpansion = 4;
  Value y = b.relu(b.batch_norm(b.conv(x, scope + ".conv1", planes, 1, 1, 0, false), scope + ".bn1"),
                   scope + ".relu");
  y = b.relu(b.batch_norm(b.conv(y, scope + ".conv2", planes, 3, stride, 1, false), scope + ".bn2"),
             scope + ".relu");
  y = b.batch_norm(b.conv(y, scope + ".conv3", planes * kExpansion, 1, 1, 0, false), scope + ".bn3");
  const bool project = stride != 1 || x.shape[1] != planes * kExpansion;
  Value shortcut = project ? downsample(b, x, scope, planes * kExpansion, stride) : x;
  return b.relu(b.add(y, shortcut, scope + ".add"), scope + ".relu");
}

}  // namespace

Network build_resnet(const std::string& name, const ModelOptions& o) {
  static const std::map<std::string, ResNetConfig> configs = {
      {"resnet18", {false, {2, 2, 2, 2}}},  {"resnet34", {false, {3, 4, 6, 3}}},
      {"resnet50", {true, {3, 4, 6, 3}}},   {"resnet101", {true, {3, 4, 23, 3}}},
      {"resnet152", {true, {3, 8, 36, 3}}},
  };
  const ResNetConfig& cfg = configs.at(name);
  Builder b(name, o);
  Value x = b.input(3, "C,H,W");
  x = b.relu(b.batch_norm(b.conv(x, "conv1", 64, 7, 2, 3, false), "bn1"), "relu");
  x = b.max_pool(x, "maxpool", 3, 2, 1);
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < cfg.blocks[stage]; ++i) {
      const std::string scope = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      x = cfg.bottleneck ? bottleneck_block(b, x, scope, planes, stride)
                         : basic_block(b, x, scope, planes, stride);
    }
  }
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  return b.finish(b.linear(x, "fc", o.classes));
}

}  // namespace d5::zoo
