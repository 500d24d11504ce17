// Wide ResNets (Zagoruyko and Komodakis, 2016) for CIFAR: depth 6n+4, widen factor k, three
// groups of n pre-activation blocks (BN-ReLU-conv, twice) with 16k, 32k and 64k channels, a 1x1
// projection shortcut where the width or stride changes, then BN-ReLU, global average pooling and
// a linear classifier. Convolutions have no bias. WRN-28-10: 36,479,194 parameters (10 classes).
#include "zoo_builder.h"

namespace d5::zoo {

namespace {

Value wide_block(Builder& b, const Value& x, const std::string& scope, int64_t out, int64_t stride) {
  const bool same = x.shape[1] == out && stride == 1;
  Value pre = b.relu(b.batch_norm(x, scope + ".bn1"), scope + ".relu1");
  Value y = b.conv(pre, scope + ".conv1", out, 3, stride, 1, false);
  y = b.relu(b.batch_norm(y, scope + ".bn2"), scope + ".relu2");
  y = b.conv(y, scope + ".conv2", out, 3, 1, 1, false);
  // The projection reads the pre-activated input, as in the authors' code.
  Value shortcut = same ? x : b.conv(pre, scope + ".convShortcut", out, 1, stride, 0, false);
  return b.add(y, shortcut, scope + ".add");
}

}  // namespace

Network build_wide_resnet(const std::string& name, int depth, int width, const ModelOptions& o) {
  const int n = (depth - 4) / 6;
  Builder b(name, o);
  Value x = b.input(3, "C,H,W");
  x = b.conv(x, "conv1", 16, 3, 1, 1, false);
  for (int group = 0; group < 3; ++group) {
    const int64_t channels = (int64_t{16} << group) * width;
    for (int i = 0; i < n; ++i) {
      const int64_t stride = group > 0 && i == 0 ? 2 : 1;
      x = wide_block(b, x, "block" + std::to_string(group + 1) + ".layer." + std::to_string(i), channels,
                     stride);
    }
  }
  x = b.relu(b.batch_norm(x, "bn1"), "relu");
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  return b.finish(b.linear(x, "fc", o.classes));
}

}  // namespace d5::zoo
