// Trilu: the upper (upper=1, the default) or lower triangular part of each matrix in the last two
// axes, ONNX's form, with the diagonal offset k (optional input 1, an int64 scalar, default 0):
//   upper: y[..., i, j] = x[..., i, j] if j - i >= k, else 0
//   lower: y[..., i, j] = x[..., i, j] if j - i <= k, else 0
// k may be any integer (a k past the matrix keeps everything or nothing). It does not change the
// output shape, so it may arrive at run time. Gradient: the same mask applied to g.
#include <cstring>

#include "movement_common.h"

namespace d5::reference {

namespace {

class TriluOp : public MovementOp {
 public:
  explicit TriluOp(const OpSpec& spec) : MovementOp(spec, {spec.inputs[0]}) {
    const Shape& s = spec.inputs[0].shape;
    D5_CHECK_ARG(s.rank() >= 2, "{}: the input must have rank >= 2 (matrices in the last two axes), got {}",
                 spec.label(), s.to_string());
    if (spec.has_input(1)) {
      const TensorDesc& k = spec.inputs[1];
      D5_CHECK_ARG(k.dtype == DType::i64 && k.numel() == 1, "{}: k must be an int64 scalar, got {}", spec.label(),
                   k.to_string());
    }
    rows_ = s[s.rank() - 2];
    cols_ = s[s.rank() - 1];
    upper_ = spec.attrs.get_int("upper", 1) != 0;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    apply_mask(in[0], out[0], k_of(in));
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) return copy_or_zero(gy[0], gx[0]);
    apply_mask(gy[0], gx[0], k_of(in));
  }

 private:
  int64_t k_of(std::span<const Tensor> in) const {
    return in.size() > 1 && in[1].defined() ? in[1].data_as<int64_t>()[0] : 0;
  }

  bool keep(int64_t i, int64_t j, int64_t k) const { return upper_ ? j - i >= k : j - i <= k; }

  // Every matrix row by row: the kept columns copied, the rest zero bytes (0 in every dtype).
  void apply_mask(const Tensor& x, Tensor& y, int64_t k) const {
    const size_t es = dtype_size(x.dtype());
    const auto* src = static_cast<const unsigned char*>(x.data());
    auto* dst = static_cast<unsigned char*>(y.data());
    const int64_t matrices = rows_ * cols_ == 0 ? 0 : x.numel() / (rows_ * cols_);
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < rows_; ++i) {
        const size_t row = static_cast<size_t>((m * rows_ + i) * cols_) * es;
        for (int64_t j = 0; j < cols_; ++j) {
          const size_t at = row + static_cast<size_t>(j) * es;
          if (keep(i, j, k)) std::memcpy(dst + at, src + at, es);
          else std::memset(dst + at, 0, es);
        }
      }
  }

  int64_t rows_ = 0, cols_ = 0;
  bool upper_ = true;
};

}  // namespace

void register_trilu_ops(OpRegistry& r) {
  add_op(r, "Trilu", true, [](const OpSpec& s) -> OpCreateResult {
    check_input_count(s, 1, 2);
    return std::make_unique<TriluOp>(s);
  });
}

}  // namespace d5::reference
