// Test operator: y = x for a rank-1 input, except that forward fails on purpose depending on x[0],
// once through each error path of the ABI. No backward.
#include <stdexcept>

#include "deep500/op/custom_op.h"

namespace {

class Throwing : public d5::CustomOperator {
 public:
  Throwing(std::span<const d5_tensor_desc> inputs, std::span<const d5_tensor_desc> outputs)
      : CustomOperator(inputs, outputs) {
    d5::custom::require(inputs.size() == 1 && inputs[0].rank == 1 && inputs[0].dtype == D5_DTYPE_F64,
                        "Throwing wants one rank-1 f64 input, got " +
                            (inputs.empty() ? std::string("none") : d5::custom::to_string(inputs[0])));
  }

  void forward(std::span<const d5_tensor> inputs, std::span<d5_tensor> outputs) override {
    const auto x = d5::custom::view<double>(inputs[0]);
    auto y = d5::custom::view<double>(outputs[0]);
    if (x[0] == 1) throw std::runtime_error("boom: x[0] is 1");
    if (x[0] == 2) throw std::invalid_argument("x[0] must not be 2");
    if (x[0] == 3) throw 42;               // not a std::exception
    if (x[0] == 4) (void)x.at(x.numel());  // out of bounds, caught by at()
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = x[i];
  }
};

}  // namespace

D5_REGISTER_OP(Throwing);
