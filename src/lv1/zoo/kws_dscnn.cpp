// The keyword-spotting DS-CNN of MLPerf Tiny (its `kws` reference, the "DS-CNN small" of Zhang et
// al., "Hello Edge", 2017) on speech features [1, frames, coefficients]: a 10x4 stride-2
// convolution to 64 channels, four depthwise-separable blocks (3x3 depthwise, 1x1 pointwise, each
// followed by batch norm and ReLU), global average pooling and a linear classifier, with dropout
// 0.2 after the first convolution and 0.4 before the pooling as the reference trains it.
//
// Every convolution keeps its bias, as Keras' Conv2D and DepthwiseConv2D do by default, so the
// count is the reference's 23,756 trainable parameters at 12 classes: conv1 2,560 + 64, BN 128,
// each block depthwise 576 + 64, BN 128, pointwise 4,096 + 64, BN 128 (5,056; four: 20,224),
// classifier 64 x 12 + 12.
#include "zoo_builder.h"

namespace d5::zoo {

namespace {

constexpr int64_t kFilters = 64;
constexpr int kBlocks = 4;

Value bn_relu(Builder& b, const Value& x, const std::string& bn, const std::string& relu) {
  return b.relu(b.batch_norm(x, bn), relu);
}

Value separable_block(Builder& b, const Value& x, const std::string& scope) {
  Value y = b.conv(x, scope + ".depthwise", kFilters, 3, 1, 1, true, kFilters);
  y = bn_relu(b, y, scope + ".bn1", scope + ".relu1");
  y = b.conv(y, scope + ".pointwise", kFilters, 1, 1, 0, true);
  return bn_relu(b, y, scope + ".bn2", scope + ".relu2");
}

}  // namespace

Network build_kws_dscnn(const ModelOptions& o) {
  Builder b("kws-dscnn", o);
  Value x = b.input(3, "C,frames,coefficients");
  // TF's "same" padding takes 49x10 to 25x5 with 4 rows above and 5 below; ONNX and PyTorch pad
  // symmetrically, and (5, 1) on each side gives the same size (each window one row earlier).
  x = b.conv(x, "conv1", kFilters, Extent2d{10, 4}, Extent2d{2, 2}, Extent2d{5, 1}, true);
  x = b.dropout(bn_relu(b, x, "bn1", "relu1"), "dropout1", 0.2);
  for (int i = 0; i < kBlocks; ++i) x = separable_block(b, x, "blocks." + std::to_string(i));
  x = b.dropout(x, "dropout2", 0.4);
  // Global rather than the reference's fixed 25x5 window, so other feature sizes (40 log-mel
  // bins) pool the whole map too.
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  return b.finish(b.linear(x, "fc", o.classes));
}

}  // namespace d5::zoo
