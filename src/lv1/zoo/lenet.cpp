// LeNet-5 (LeCun et al., 1998) as PyTorch tutorials write it for MNIST: the 5x5 convolutions of the
// paper with ReLU and max pooling, conv1 padded by 2 so a 28x28 digit reaches the 16x5x5 map of a
// 32x32 one. 61,706 parameters at 10 classes.
#include "zoo_builder.h"

namespace d5::zoo {

Network build_lenet5(const ModelOptions& o) {
  Builder b("lenet5", o);
  Value x = b.input(3, "C,H,W");
  x = b.max_pool(b.relu(b.conv(x, "conv1", 6, 5, 1, 2, true), "relu1"), "pool1", 2, 2, 0);
  x = b.max_pool(b.relu(b.conv(x, "conv2", 16, 5, 1, 0, true), "relu2"), "pool2", 2, 2, 0);
  x = b.flatten(x, "flatten");
  x = b.relu(b.linear(x, "fc1", 120), "relu3");
  x = b.relu(b.linear(x, "fc2", 84), "relu4");
  return b.finish(b.linear(x, "fc3", o.classes));
}

}  // namespace d5::zoo
