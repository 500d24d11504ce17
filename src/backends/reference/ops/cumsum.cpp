// CumSum: the running sum along `axis` (input 1, a scalar), ONNX's form:
//   y[..., i, ...] = sum of x[..., j, ...] over j <= i   (exclusive: j < i; reverse: j >= i / j > i)
// The gradient is the same scan of the upstream gradient run the other way:
//   dx[j] = sum of g[i] over the i whose y[i] contains x[j], i.e. cumsum(g, exclusive, !reverse).
#include "../ref_common.h"

namespace d5::reference {

namespace {

class CumSumOp : public ReferenceOp {
 public:
  explicit CumSumOp(const OpSpec& s) : ReferenceOp(s, {s.inputs.at(0)}) {
    D5_CHECK_ARG(s.inputs.size() == 2, "{}: needs x and axis, got {} input(s)", s.label(), s.inputs.size());
    D5_CHECK_ARG(s.inputs[1].dtype == DType::i32 || s.inputs[1].dtype == DType::i64,
                 "{}: axis must be int32 or int64, not {}", s.label(), to_string(s.inputs[1].dtype));
    D5_CHECK_ARG(s.inputs[1].numel() == 1, "{}: axis must hold one value, its shape is {}", s.label(),
                 s.inputs[1].shape.to_string());
    D5_CHECK_ARG(s.inputs[0].shape.rank() >= 1, "{}: x must have at least one dimension", s.label());
    exclusive_ = s.attrs.get_int("exclusive", 0) != 0;
    reverse_ = s.attrs.get_int("reverse", 0) != 0;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    scan(in[0], out[0], axis_of(in[1]), exclusive_, reverse_);
  }

  std::vector<bool> differentiable_inputs() const override { return {true, false}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) {
      gx[0].fill(0);
      return;
    }
    scan(gy[0], gx[0], axis_of(in[1]), exclusive_, !reverse_);
  }

  double flops() const override { return static_cast<double>(spec_.inputs[0].numel()); }

 private:
  // Axis in [-rank, rank), as ONNX allows; InvalidArgument otherwise.
  int64_t axis_of(const Tensor& axis) const {
    const int64_t rank = static_cast<int64_t>(spec_.inputs[0].shape.rank());
    const auto a = static_cast<int64_t>(axis.get(0));
    D5_CHECK_ARG(a >= -rank && a < rank, "{}: axis {} is out of range for rank {}", spec_.label(), a, rank);
    return a < 0 ? a + rank : a;
  }

  void scan(const Tensor& x, Tensor& y, int64_t axis, bool exclusive, bool reverse) const {
    const Shape& s = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
    const int64_t n = s[static_cast<size_t>(axis)];
    dispatch<float, double, int32_t, int64_t>(x.dtype(), spec_, [&]<typename T>() {
      const T* src = x.data_as<T>();
      T* dst = y.data_as<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          // Floating sums accumulate in double, integer ones in int64.
          using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
          Acc sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            const int64_t j = reverse ? n - 1 - k : k;
            const int64_t at = (o * n + j) * inner + i;
            if (!exclusive) sum += static_cast<Acc>(src[at]);
            dst[at] = static_cast<T>(sum);
            if (exclusive) sum += static_cast<Acc>(src[at]);
          }
        }
    });
  }

  bool exclusive_ = false, reverse_ = false;
};

}  // namespace

void register_cumsum_ops(OpRegistry& r) { add_op(r, "CumSum", true, make<CumSumOp>); }

}  // namespace d5::reference
