// AlexNet in torchvision's single-tower form (Krizhevsky, 2014, "One weird trick"): five
// convolutions, adaptive average pooling to 6x6 and three fully connected layers with dropout.
// 61,100,840 parameters at 1000 classes.
#include "zoo_builder.h"

namespace d5::zoo {

Network build_alexnet(const ModelOptions& o) {
  Builder b("alexnet", o);
  Value x = b.input(3, "C,H,W");
  x = b.relu(b.conv(x, "features.0", 64, 11, 4, 2, true), "features.1");
  x = b.max_pool(x, "features.2", 3, 2, 0);
  x = b.relu(b.conv(x, "features.3", 192, 5, 1, 2, true), "features.4");
  x = b.max_pool(x, "features.5", 3, 2, 0);
  x = b.relu(b.conv(x, "features.6", 384, 3, 1, 1, true), "features.7");
  x = b.relu(b.conv(x, "features.8", 256, 3, 1, 1, true), "features.9");
  x = b.relu(b.conv(x, "features.10", 256, 3, 1, 1, true), "features.11");
  x = b.max_pool(x, "features.12", 3, 2, 0);
  x = b.flatten(b.adaptive_avg_pool(x, "avgpool", 6), "flatten");
  x = b.dropout(x, "classifier.0", 0.5);
  x = b.relu(b.linear(x, "classifier.1", 4096), "classifier.2");
  x = b.dropout(x, "classifier.3", 0.5);
  x = b.relu(b.linear(x, "classifier.4", 4096), "classifier.5");
  return b.finish(b.linear(x, "classifier.6", o.classes));
}

}  // namespace d5::zoo
