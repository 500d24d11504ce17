// Cast (element type conversion between every deep500 dtype) and Dropout (seeded Bernoulli mask).
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/rng.h"
#include "deep500/op/op_semantics.h"
#include "movement_common.h"

namespace d5::reference {

namespace {

template <typename F>
void dispatch_any(DType t, const OpSpec& spec, F&& f) {
  dispatch<float, double, Half, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t, bool>(t, spec,
                                                                                            std::forward<F>(f));
}

template <typename T>
constexpr bool is_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// ONNX TensorProto.DataType codes of the types deep500 tensors can hold.
struct OnnxType {
  int64_t code;
  DType dtype;
  const char* name;
};
constexpr OnnxType kOnnxTypes[] = {
    {1, DType::f32, "FLOAT"},   {2, DType::u8, "UINT8"},     {3, DType::i8, "INT8"},
    {5, DType::i16, "INT16"},   {6, DType::i32, "INT32"},    {7, DType::i64, "INT64"},
    {9, DType::boolean, "BOOL"}, {10, DType::f16, "FLOAT16"}, {11, DType::f64, "DOUBLE"},
    {16, DType::bf16, "BFLOAT16"}};

DType onnx_dtype(int64_t code, const OpSpec& spec) {
  std::vector<std::string> known;
  for (const auto& t : kOnnxTypes) {
    if (t.code == code) return t.dtype;
    known.push_back(fmt::format("{} {}", t.code, t.name));
  }
  D5_THROW(InvalidArgument, "{}: to={} is not a supported ONNX element type (supported: {})", spec.label(),
           code, fmt::join(known, ", "));
}

// One element, with numpy's astype semantics: floats truncate toward zero, integers wrap
// (defined in C++20), anything non-zero (NaN too) is true. A float that does not fit the integer
// type has no defined result, so it is an error rather than undefined behaviour.
template <typename D, typename S>
D convert(S v, const OpSpec& spec) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<S, bool>) {
    if constexpr (is_float_v<D>)
      return from_double<D>(v ? 1.0 : 0.0);
    else
      return static_cast<D>(v);
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_float_v<S>)
      return to_double(v) != 0.0;
    else
      return v != 0;
  } else if constexpr (is_float_v<D>) {
    if constexpr (std::is_same_v<D, float> || std::is_same_v<D, double>) {
      if constexpr (is_float_v<S>)
        return static_cast<D>(to_double(v));
      else
        return static_cast<D>(v);  // one rounding, also for int64 -> float
    } else {
      return from_double<D>(to_double(v));
    }
  } else if constexpr (is_float_v<S>) {
    const double t = std::trunc(to_double(v));
    const double upper = std::ldexp(1.0, std::numeric_limits<D>::digits);
    D5_CHECK_ARG(t >= static_cast<double>(std::numeric_limits<D>::lowest()) && t < upper,
                 "{}: value {} does not fit in {}", spec.label(), to_double(v), to_string(dtype_of_v<D>));
    return static_cast<D>(t);
  } else {
    return static_cast<D>(v);
  }
}

void cast_tensor(const Tensor& src, Tensor& dst, const OpSpec& spec) {
  if (src.dtype() == dst.dtype()) return copy_bytes(src, dst);
  dispatch_any(src.dtype(), spec, [&]<typename S>() {
    dispatch_any(dst.dtype(), spec, [&]<typename D>() {
      const S* s = src.data_as<S>();
      D* d = dst.data_as<D>();
      for (int64_t i = 0; i < src.numel(); ++i) d[i] = convert<D>(s[i], spec);
    });
  });
}

class CastOp : public ReferenceOp {
 public:
  CastOp(const OpSpec& spec, DType to) : ReferenceOp(spec, {TensorDesc{to, spec.inputs[0].shape}}) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    cast_tensor(in[0], out[0], spec_);
  }
  std::vector<bool> differentiable_inputs() const override {
    if (!is_floating(spec_.inputs[0].dtype) || !is_floating(outputs_[0].dtype)) return {};
    return {true};
  }
  std::string no_gradient_reason() const override {
    return fmt::format("Cast from {} to {}: only casts between floating-point types have gradients",
                       to_string(spec_.inputs[0].dtype), to_string(outputs_[0].dtype));
  }
  // The gradient of a conversion is the upstream gradient converted back.
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (gy[0].defined())
      cast_tensor(gy[0], gx[0], spec_);
    else
      copy_or_zero(gy[0], gx[0]);
  }
};

// Dropout masks come from RngStream(seed, "Dropout/<node name>"): the 'seed' attribute when
// given, else this fixed value, so runs repeat exactly. Each forward call draws a fresh mask.

class DropoutOp : public ReferenceOp {
 public:
  explicit DropoutOp(const OpSpec& spec)
      : ReferenceOp(spec, outputs_of(spec)),
        rng_(static_cast<uint64_t>(spec.attrs.get_int("seed", kDefaultDropoutSeed)),
             "Dropout/" + spec.name) {
    const DType t = spec.inputs[0].dtype;
    D5_CHECK_ARG(is_floating(t), "{}: dtype {} is not supported (floating point only)", spec.label(),
                 to_string(t));
    if (spec.has_input(1))
      D5_CHECK_ARG(is_floating(spec.inputs[1].dtype) && spec.inputs[1].numel() == 1,
                   "{}: ratio must be one floating-point value, got {}", spec.label(),
                   spec.inputs[1].to_string());
    if (spec.has_input(2))
      D5_CHECK_ARG(spec.inputs[2].dtype == DType::boolean && spec.inputs[2].numel() == 1,
                   "{}: training_mode must be one bool, got {}", spec.label(), spec.inputs[2].to_string());
    check_ratio(spec.attrs.get_float("ratio", 0.5));  // opset < 12: ratio is an attribute
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const double ratio = check_ratio(spec_.has_input(1) ? in[1].get(0) : spec_.attrs.get_float("ratio", 0.5));
    const bool training = spec_.has_input(2) && in[2].get(0) != 0;
    const auto n = static_cast<size_t>(in[0].numel());
    mask_.assign(n, 1);
    scale_ = 1;
    if (training && ratio > 0) {
      // ratio 1 drops everything (as PyTorch does) instead of scaling by infinity.
      scale_ = ratio < 1 ? 1 / (1 - ratio) : 0;
      for (auto& m : mask_) m = rng_.uniform() >= ratio;
    }
    apply_mask(in[0], out[0]);
    if (out.size() > 1) std::memcpy(out[1].data(), mask_.data(), n);  // bool is one byte holding 0 or 1
  }

  std::vector<bool> differentiable_inputs() const override {
    std::vector<bool> m(spec_.inputs.size(), false);
    m[0] = true;
    return m;
  }
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    D5_CHECK_ARG(mask_.size() == static_cast<size_t>(gx[0].numel()), "{}: backward needs a forward call first",
                 spec_.label());
    if (gy[0].defined())
      apply_mask(gy[0], gx[0]);
    else
      copy_or_zero(gy[0], gx[0]);
  }

  double flops() const override { return static_cast<double>(spec_.inputs[0].numel()); }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& spec) {
    check_input_count(spec, 1, 3);
    std::vector<TensorDesc> o = {spec.inputs[0]};
    if (spec.num_outputs != 1) o.push_back(TensorDesc{DType::boolean, spec.inputs[0].shape});
    return o;
  }

  double check_ratio(double r) const {
    D5_CHECK_ARG(r >= 0 && r <= 1, "{}: ratio {} is outside [0, 1]", spec_.label(), r);
    return r;
  }

  // dst = src * mask * scale: the forward on the data, the backward on the gradient.
  void apply_mask(const Tensor& src, Tensor& dst) const {
    dispatch_all_floats(src.dtype(), spec_, [&]<typename T>() {
      const T* s = src.data_as<T>();
      T* d = dst.data_as<T>();
      for (size_t i = 0; i < mask_.size(); ++i)
        d[i] = mask_[i] ? (scale_ == 1 ? s[i] : from_double<T>(to_double(s[i]) * scale_)) : from_double<T>(0.0);
    });
  }

  RngStream rng_;
  std::vector<uint8_t> mask_;  // of the last forward call
  double scale_ = 1;
};

}  // namespace

void register_cast_dropout_ops(OpRegistry& r) {
  add_op(r, "Cast", true, [](const OpSpec& s) -> OpCreateResult {
    check_input_count(s, 1, 1);
    return std::make_unique<CastOp>(s, onnx_dtype(s.attrs.get_int("to"), s));
  });
  add_op(r, "Dropout", true, [](const OpSpec& s) -> OpCreateResult { return std::make_unique<DropoutOp>(s); });
}

}  // namespace d5::reference
