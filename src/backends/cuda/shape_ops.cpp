// Operators that only reshape: the output holds the input's elements in the same order, so
// forward and backward are device-to-device copies (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity). Shape inputs (Reshape's shape, the axes of Squeeze/Unsqueeze from opset 13) are read
// by the oracle at creation, which is why they must be known then.
#include "cuda_common.h"

namespace d5::cuda {

namespace {

class CopyOp : public CudaOp {
 public:
  explicit CopyOp(const OpSpec& s) : CudaOp(s) {
    refuse_if(s.inputs[0].dtype != DType::f32 && s.inputs[0].dtype != DType::i64 && s.inputs[0].dtype != DType::i32,
              "copies f32, i32 and i64 tensors; the data is {}", to_string(s.inputs[0].dtype));
  }

  std::string implementation() const override { return "cuda:copy"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    copy_device(out[0].data(), in[0].data(), out[0].bytes());
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined()) return;
    if (!gy[0].defined()) return zero_tensor(gx[0]);
    copy_device(gx[0].data(), gy[0].data(), gx[0].bytes());
  }
};

}  // namespace

void register_shape_ops(OpRegistry& r) {
  for (const char* type : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    add_op(
        r, type, [](const OpSpec& s) { return std::make_unique<CopyOp>(s); },
        {.backward = true, .any_dtype = true, .notes = "a device copy; shape inputs must be known at creation"});
}

}  // namespace d5::cuda
