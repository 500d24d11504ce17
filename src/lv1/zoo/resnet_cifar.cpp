// ResNets for CIFAR (He et al., 2016, section 4.2): depth 6n+2, a 3x3 stem of 16 channels, three
// stages of n basic blocks with 16, 32 and 64 channels, and shortcuts of option A: where a stage
// halves the map and doubles the channels, the shortcut subsamples by 2 and pads the new channels
// with zeros, so it has no parameters. ResNet-20: 269,722 parameters (10 classes).
#include "zoo_builder.h"

namespace d5::zoo {

namespace {

// Option A: x[:, :, ::2, ::2] padded with zero channels, half before and half after (as the
// widely used PyTorch port does with F.pad).
Value option_a_shortcut(Builder& b, const Value& x, const std::string& scope, int64_t out_channels) {
  const Shape& s = x.shape;
  const Shape sub{s[0], s[1], (s[2] + 1) / 2, (s[3] + 1) / 2};
  Value y = b.node("Slice", scope + ".subsample",
                   {x.name, b.int64s({0, 0}).name, b.int64s({s[2], s[3]}).name, b.int64s({2, 3}).name,
                    b.int64s({2, 2}).name},
                   sub);
  const int64_t extra = out_channels - s[1];
  const int64_t before = extra / 2, after = extra - before;
  return b.node("Pad", scope + ".pad", {y.name, b.int64s({0, before, 0, 0, 0, after, 0, 0}).name},
                Shape{s[0], out_channels, sub[2], sub[3]});
}

Value basic_block(Builder& b, const Value& x, const std::string& scope, int64_t planes, int64_t stride) {
  Value y = b.relu(b.batch_norm(b.conv(x, scope + ".conv1", planes, 3, stride, 1, false), scope + ".bn1"),
                   scope + ".relu1");
  y = b.batch_norm(b.conv(y, scope + ".conv2", planes, 3, 1, 1, false), scope + ".bn2");
  Value shortcut =
      stride != 1 || x.shape[1] != planes ? option_a_shortcut(b, x, scope + ".shortcut", planes) : x;
  return b.relu(b.add(y, shortcut, scope + ".add"), scope + ".relu2");
}

}  // namespace

Network build_resnet_cifar(const std::string& name, int depth, const ModelOptions& o) {
  const int n = (depth - 2) / 6;
  Builder b(name, o);
  Value x = b.input(3, "C,H,W");
  x = b.relu(b.batch_norm(b.conv(x, "conv1", 16, 3, 1, 1, false), "bn1"), "relu");
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = int64_t{16} << stage;
    for (int i = 0; i < n; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      x = basic_block(b, x, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), planes, stride);
    }
  }
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  return b.finish(b.linear(x, "linear", o.classes));
}

}  // namespace d5::zoo
