#include "widened.h"

#include <optional>

#include <fmt/format.h>

namespace d5::reference {

namespace {

bool is_low_precision(DType t) { return t == DType::f16 || t == DType::bf16; }

// The one low-precision dtype of the spec's floating inputs; nullopt when there is none. Throws
// InvalidArgument when f16/bf16 is mixed with another floating dtype.
std::optional<DType> low_precision_of(const OpSpec& spec) {
  std::optional<DType> low;
  bool other_float = false;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!spec.has_input(i)) continue;
    const DType t = spec.inputs[i].dtype;
    if (is_low_precision(t)) {
      D5_CHECK_ARG(!low || *low == t, "{}: inputs mix {} and {}", spec.label(), to_string(*low), to_string(t));
      low = t;
    } else if (is_floating(t)) {
      other_float = true;
    }
  }
  D5_CHECK_ARG(!(low && other_float), "{}: inputs mix {} with another floating dtype; cast them to one",
               spec.label(), to_string(*low));
  return low;
}

std::vector<Tensor> cast_all(std::span<const Tensor> ts, DType from, DType to) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.defined() && t.dtype() == from ? t.cast(to) : t);
  return out;
}

void store(const Tensor& value, Tensor& into) { into.copy_from(value.dtype() == into.dtype() ? value : value.cast(into.dtype())); }

class WidenedOp final : public ReferenceOp {
 public:
  WidenedOp(const OpSpec& spec, DType low, std::unique_ptr<Operator> inner)
      : ReferenceOp(spec, narrowed(inner->output_descs(), low)), low_(low), inner_(std::move(inner)) {}

  std::string implementation() const override { return inner_->implementation() + " (widened to f32)"; }
  std::vector<bool> differentiable_inputs() const override { return inner_->differentiable_inputs(); }
  std::string no_gradient_reason() const override { return inner_->no_gradient_reason(); }
  double flops() const override { return inner_->flops(); }
  double backward_flops() const override { return inner_->backward_flops(); }
  int64_t workspace_bytes() const override { return inner_->workspace_bytes(); }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    wide_out_ = inner_->run_forward(cast_all(in, low_, DType::f32));
    for (size_t k = 0; k < out.size(); ++k) store(wide_out_[k], out[k]);
  }

  // The inner operator's backward sees its own f32 outputs of the last forward, not the rounded
  // ones: the gradient is that of the f32 computation.
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    const std::vector<Tensor> wide_in = cast_all(in, low_, DType::f32);
    if (wide_out_.size() != out.size()) wide_out_ = inner_->run_forward(wide_in);
    const std::vector<Tensor> wide_gx = inner_->run_backward(cast_all(gy, low_, DType::f32), wide_in, wide_out_);
    for (size_t k = 0; k < gx.size(); ++k)
      if (gx[k].defined() && k < wide_gx.size() && wide_gx[k].defined()) store(wide_gx[k], gx[k]);
  }

 private:
  static std::vector<TensorDesc> narrowed(std::vector<TensorDesc> ds, DType low) {
    for (auto& d : ds)
      if (d.dtype == DType::f32) d.dtype = low;
    return ds;
  }

  DType low_;
  std::unique_ptr<Operator> inner_;
  std::vector<Tensor> wide_out_;
};

}  // namespace

OpFactory widening(OpFactory f32_factory) {
  return [f32 = std::move(f32_factory)](const OpSpec& spec) -> OpCreateResult {
    const auto low = low_precision_of(spec);
    if (!low) return f32(spec);
    OpSpec wide = spec;
    for (size_t i = 0; i < wide.inputs.size(); ++i)
      if (wide.has_input(i) && wide.inputs[i].dtype == *low) wide.inputs[i].dtype = DType::f32;
    OpCreateResult inner = f32(wide);
    if (auto* why = std::get_if<std::string>(&inner)) return *why;
    return std::make_unique<WidenedOp>(spec, *low, std::move(std::get<std::unique_ptr<Operator>>(inner)));
  };
}

}  // namespace d5::reference
