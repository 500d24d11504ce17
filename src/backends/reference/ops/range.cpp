// Range: the sequence start, start + delta, start + 2 delta, ... up to limit (excluded), ONNX's
// form (NumPy's arange): scalars start, limit, delta of one dtype (f32, f64, i16, i32, i64),
//   n = max(ceil((limit - start) / delta), 0),   y[i] = start + i * delta   for i < n
// n is the output's length, so the three values must be known when the operator is created (d5's
// graphs have static shapes); a Range on run-time values is refused with that reason.
// No gradient: its inputs are constants of the graph by that rule.
#include <cmath>
#include <limits>

#include "movement_common.h"

namespace d5::reference {

namespace {

class RangeOp : public ReferenceOp {
 public:
  RangeOp(const OpSpec& spec, int64_t n) : ReferenceOp(spec, {TensorDesc{spec.inputs[0].dtype, Shape{n}}}) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch<float, double, int16_t, int32_t, int64_t>(in[0].dtype(), spec_, [&]<typename T>() {
      const T start = in[0].data_as<T>()[0], delta = in[2].data_as<T>()[0];
      T* y = out[0].data_as<T>();
      const int64_t n = out[0].numel();
      for (int64_t i = 0; i < n; ++i) {
        // Integers: exact. The value lies between start and limit, but i * delta alone may not fit
        // in int64 (start -2^62, delta 2^61): modular arithmetic in uint64 gets the same bits.
        if constexpr (std::is_integral_v<T>)
          y[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(start)) +
                                                     static_cast<uint64_t>(i) *
                                                         static_cast<uint64_t>(static_cast<int64_t>(delta))));
        else
          y[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(delta));
      }
    });
  }

  std::string no_gradient_reason() const override {
    return "Range's start, limit and delta decide its length, so they are constants of the graph";
  }

  double flops() const override { return 2 * static_cast<double>(outputs_[0].numel()); }
};

// The length n for the known start, limit, delta; InvalidArgument for a zero delta, non-finite
// values, or a length beyond what an int64 count (and a tensor) can hold.
int64_t range_length(const OpSpec& spec) {
  check_input_count(spec, 3, 3);
  const DType t = spec.inputs[0].dtype;
  for (size_t i = 0; i < 3; ++i) {
    const char* what = i == 0 ? "start" : i == 1 ? "limit" : "delta";
    D5_CHECK_ARG(spec.inputs[i].dtype == t && spec.inputs[i].numel() == 1,
                 "{}: start, limit and delta must be scalars of one dtype; {} is {}", spec.label(), what,
                 spec.inputs[i].to_string());
  }
  return dispatch<float, double, int16_t, int32_t, int64_t>(t, spec, [&]<typename T>() -> int64_t {
    const T start = constant_input(spec, 0, "start").data_as<T>()[0];
    const T limit = constant_input(spec, 1, "limit").data_as<T>()[0];
    const T delta = constant_input(spec, 2, "delta").data_as<T>()[0];
    D5_CHECK_ARG(delta != T{0}, "{}: delta is 0, which never reaches limit", spec.label());
    // In long double, (limit - start) / delta is exact enough for every int64 pair.
    const long double span = static_cast<long double>(limit) - static_cast<long double>(start);
    const long double steps = std::ceil(span / static_cast<long double>(delta));
    D5_CHECK_ARG(std::isfinite(steps), "{}: start {}, limit {}, delta {} give no finite length", spec.label(),
                 static_cast<double>(start), static_cast<double>(limit), static_cast<double>(delta));
    if (steps <= 0) return 0;
    constexpr long double kMax = static_cast<long double>(std::numeric_limits<int64_t>::max() / 16);
    D5_CHECK_ARG(steps <= kMax, "{}: start {}, limit {}, delta {} ask for {} elements, more than a tensor can hold",
                 spec.label(), static_cast<double>(start), static_cast<double>(limit), static_cast<double>(delta),
                 static_cast<double>(steps));
    return static_cast<int64_t>(steps);
  });
}

}  // namespace

void register_range_ops(OpRegistry& r) {
  add_op(r, "Range", false,
         [](const OpSpec& s) -> OpCreateResult { return std::make_unique<RangeOp>(s, range_length(s)); });
}

}  // namespace d5::reference
