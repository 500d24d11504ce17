// ReduceSum, ReduceMean, ReduceMax and ReduceL2 on the backend's own kernels
// (reduce_kernels.cu). The axes come from the `axes` attribute or from input 1 (ReduceSum at
// opset 13+, every reduction at 18+), which must then be known at creation. Empty axes reduce
// everything unless noop_with_empty_axes=1, which makes the op the identity.
#include "cuda_dims.h"
#include "reduce_kernels.h"

namespace d5::cuda {
inline namespace movement {

namespace {

class ReduceOp : public CudaOp {
 public:
  ReduceOp(const OpSpec& s, ReduceKind kind) : CudaOp(s), kind_(kind) {
    refuse_if(s.inputs[0].dtype != DType::f32, "this cuda reduction computes in f32 only; data is {}",
              to_string(s.inputs[0].dtype));
    const auto& x = s.inputs[0].shape.dims();
    const auto axes = ints_input_or_attr(s, 1, "axes").value_or(std::vector<int64_t>{});
    noop_ = axes.empty() && s.attrs.get_int("noop_with_empty_axes", 0) != 0;
    std::vector<bool> reduced(x.size(), axes.empty() && !noop_);
    for (int64_t a : axes) reduced[axis_index(a, x.size())] = true;
    red_ = reduction_over(x, reduced);
    // Input positions to output offsets, for the gradient: the kept axes' strides, 0 elsewhere.
    std::vector<int64_t> kept(x.size());
    for (size_t k = 0; k < x.size(); ++k) kept[k] = reduced[k] ? 1 : x[k];
    auto strides = row_strides(kept);
    for (size_t k = 0; k < x.size(); ++k)
      if (reduced[k]) strides[k] = 0;
    to_out_ = strided_map(x, strides);
    if (kind == ReduceKind::Max) argmax_ = DeviceBuffer(static_cast<size_t>(red_.outputs) * sizeof(int64_t));
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (noop_) return copy_device(out[0].data(), in[0].data(), in[0].bytes());
    reduce_f32(fptr(in[0]), fptr(out[0]), argmax_.as<int64_t>(), red_.outputs, red_.group, red_.plan, kind_,
               nullptr);
    check_launch("reduce_f32");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    Tensor& g = gx[0];
    if (!g.defined() || g.numel() == 0) return;
    if (!gy[0].defined()) return zero_tensor(g);
    if (noop_) return copy_device(g.data(), gy[0].data(), g.bytes());
    if (kind_ == ReduceKind::Max) {
      // The gradient goes to the first maximum found by the last forward.
      reduce_max_backward_f32(fptr(gy[0]), argmax_.as<int64_t>(), fptr(g), g.numel(), red_.outputs, op_stream());
      check_launch("reduce_max_backward_f32");
      return;
    }
    reduce_backward_f32(fptr(gy[0]), fptr(in[0]), fptr(out[0]), fptr(g), g.numel(), to_out_, kind_, red_.group,
                        nullptr);
    check_launch("reduce_backward_f32");
  }

 private:
  ReduceKind kind_;
  bool noop_ = false;
  Reduction red_;
  StridedMap to_out_;
  DeviceBuffer argmax_;
};

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  const std::pair<const char*, ReduceKind> kinds[] = {{"ReduceSum", ReduceKind::Sum},
                                                      {"ReduceMean", ReduceKind::Mean},
                                                      {"ReduceMax", ReduceKind::Max},
                                                      {"ReduceL2", ReduceKind::L2}};
  for (const auto& [name, kind] : kinds)
    add_op(
        r, name,
        [kind](const OpSpec& s) -> std::unique_ptr<Operator> { return std::make_unique<ReduceOp>(s, kind); },
        {.backward = true,
         .any_dtype = true,
         .notes = "f32 data; axes as attribute or as input 1 known at creation; sums in double"});
}

}  // inline namespace movement
}  // namespace d5::cuda
