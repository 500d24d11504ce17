// VGG (Simonyan and Zisserman, 2015) as torchvision builds it without batch normalization:
// configurations A (VGG-11) and D (VGG-16) of 3x3 convolutions with bias and ReLU, 2x2 max
// pooling, adaptive average pooling to 7x7 and a 4096-4096 classifier with dropout.
// VGG-11: 132,863,336 parameters; VGG-16: 138,357,544 (1000 classes).
#include <map>

#include "zoo_builder.h"

namespace d5::zoo {

Network build_vgg(const std::string& name, const ModelOptions& o) {
  constexpr int64_t M = 0;  // max pooling
  static const std::map<std::string, std::vector<int64_t>> configs = {
      {"vgg11", {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M}},
      {"vgg16", {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M}},
  };
  Builder b(name, o);
  Value x = b.input(3, "C,H,W");
  int index = 0;  // torchvision's nn.Sequential index, which names the parameters
  for (int64_t c : configs.at(name)) {
    const std::string scope = "features." + std::to_string(index);
    if (c == M) {
      x = b.max_pool(x, scope, 2, 2, 0);
      index += 1;
    } else {
      x = b.relu(b.conv(x, scope, c, 3, 1, 1, true), "features." + std::to_string(index + 1));
      index += 2;
    }
  }
  x = b.flatten(b.adaptive_avg_pool(x, "avgpool", 7), "flatten");
  x = b.dropout(b.relu(b.linear(x, "classifier.0", 4096), "classifier.1"), "classifier.2", 0.5);
  x = b.dropout(b.relu(b.linear(x, "classifier.3", 4096), "classifier.4"), "classifier.5", 0.5);
  return b.finish(b.linear(x, "classifier.6", o.classes));
}

}  // namespace d5::zoo
