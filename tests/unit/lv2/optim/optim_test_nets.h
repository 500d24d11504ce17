#pragma once
// Small networks whose gradients the optimizer tests control.
#include "deep500/net/model_zoo.h"
#include "deep500/net/network.h"

namespace d5::test {

// loss = sum(w * x): the gradient of w is the fed x, so a test chooses every step's gradient.
inline Network linear_loss_net(const Tensor& w0) {
  Network net("linear_loss");
  net.add_input("x", w0.desc());
  net.feed_tensor("w", w0.clone(), true);
  net.add_node({"mul", "Mul", "", {}, {"x", "w"}, {"prod"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"prod"}, {"loss"}});
  net.add_output("loss");
  return net;
}

// loss = sum((w - x)^2): minimized at w = x, with gradient 2 (w - x).
inline Network quadratic_loss_net(const Tensor& w0) {
  Network net("quadratic_loss");
  net.add_input("x", w0.desc());
  net.feed_tensor("w", w0.clone(), true);
  net.add_node({"sub", "Sub", "", {}, {"w", "x"}, {"diff"}});
  net.add_node({"sq", "Mul", "", {}, {"diff", "diff"}, {"sq_out"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"sq_out"}, {"loss"}});
  net.add_output("loss");
  return net;
}

// The zoo's MLP at a size where a training step takes milliseconds: 12 inputs, 4 classes, batch 8.
inline Network small_mlp(uint64_t seed) {
  ModelOptions mo;
  mo.batch = 8;
  mo.classes = 4;
  mo.input_shape = {12};
  mo.with_loss = true;
  mo.seed = seed;
  return build_model("mlp", mo);
}

}  // namespace d5::test
