// A multilayer perceptron: the input flattened, two hidden layers (512 and 256 units) with ReLU,
// and a linear classifier. 535,818 parameters for 1x28x28 inputs and 10 classes.
#include "zoo_builder.h"

namespace d5::zoo {

Network build_mlp(const ModelOptions& o) {
  Builder b("mlp", o);
  // Any per-sample shape: the first layer reads it flattened.
  const size_t rank = o.input_shape.size();
  Value x = b.input(rank, "any per-sample shape");
  if (rank != 1) x = b.flatten(x, "flatten");
  x = b.relu(b.linear(x, "fc1", 512), "relu1");
  x = b.relu(b.linear(x, "fc2", 256), "relu2");
  return b.finish(b.linear(x, "fc3", o.classes));
}

}  // namespace d5::zoo
