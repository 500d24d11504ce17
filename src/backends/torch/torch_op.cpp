#include "torch_op.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstring>

#include "deep500/core/error.h"

namespace d5::torch_backend {

namespace {

// Runs f, turning ATen's exceptions (bad indices, division by zero, ...) into InvalidArgument
// naming the operator.
template <typename F>
auto guarded(const OpSpec& spec, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    D5_THROW(InvalidArgument, "{} (torch): {}", spec.label(), e.what_without_backtrace());
  }
}

}  // namespace

at::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::f32:
      return at::kFloat;
    case DType::f64:
      return at::kDouble;
    case DType::f16:
      return at::kHalf;
    case DType::bf16:
      return at::kBFloat16;
    case DType::i8:
      return at::kChar;
    case DType::i16:
      return at::kShort;
    case DType::i32:
      return at::kInt;
    case DType::i64:
      return at::kLong;
    case DType::u8:
      return at::kByte;
    case DType::boolean:
      return at::kBool;
  }
  D5_THROW(Internal, "dtype {} has no torch equivalent", static_cast<int>(t));
}

at::Tensor view_of(const Tensor& t) { return view_on(t, at::Device(at::kCPU)); }

at::Tensor view_on(const Tensor& t, const at::Device& where) {
  if (!t.defined()) return {};
  const auto dims = dims_of(t.shape());
  const auto options = at::TensorOptions().dtype(scalar_type(t.dtype())).device(where);
  // An empty d5 tensor may have no buffer at all.
  if (t.numel() == 0) return at::empty(dims, options);
  // The view never owns the buffer; const inputs are never written (kernels are functional).
  return at::from_blob(const_cast<void*>(t.data()), dims, options);
}

std::vector<int64_t> dims_of(const Shape& s) { return s.dims(); }

DType dtype_of(at::ScalarType t) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i16, DType::i32,
                  DType::i64, DType::u8, DType::boolean})
    if (scalar_type(d) == t) return d;
  D5_THROW(InvalidArgument, "torch dtype {} has no deep500 equivalent", c10::toString(t));
}

namespace {

bool adoptable_as(const at::Tensor& result, const TensorDesc& desc, const at::Device& where) {
  if (!result.defined() || result.layout() != at::kStrided || result.device() != where || desc.numel() == 0)
    return false;
  // Sole owner of its whole storage: not an input's view, not a tensor the kernel keeps, and no
  // larger buffer kept alive behind a smaller output (the memory statistics count desc's bytes).
  // Not part of an autograd graph either, which keeping the tensor would keep alive.
  return !result.requires_grad() && result.scalar_type() == scalar_type(desc.dtype) && result.is_contiguous() && result.use_count() == 1 &&
         result.storage().use_count() == 1 && result.storage().nbytes() == desc.bytes() &&
         is_tensor_aligned(result.data_ptr());
}

}  // namespace

bool adoptable(const at::Tensor& result, const Tensor& dst) {
  if (!dst.defined() || dst.is_view() || dst.device().kind != DeviceKind::cpu) return false;
  return adoptable_as(result, dst.desc(), at::Device(at::kCPU));
}

Tensor to_owned(const at::Tensor& result, const TensorDesc& desc) {
  return to_owned(result, desc, Device::cpu(), at::Device(at::kCPU));
}

Tensor to_owned(const at::Tensor& result, const TensorDesc& desc, const Device& device, const at::Device& where) {
  // Tensor::adopt takes host buffers only: on a device the result is copied into d5's memory
  // there (one device-side copy per result).
  if (device == Device::cpu() && adoptable_as(result, desc, where))
    return Tensor::adopt(desc, result.data_ptr(), std::make_shared<at::Tensor>(result));
  Tensor t = Tensor::uninitialized(desc, device);
  if (t.numel() > 0) view_on(t, where).copy_(result.detach());
  return t;
}

void store_result(const at::Tensor& result, Tensor& dst, const at::Tensor& dst_view) {
  if (adoptable(result, dst)) {
    dst = Tensor::adopt(dst.desc(), result.data_ptr(), std::make_shared<at::Tensor>(result));
    return;
  }
  if (dst_view.numel() > 0) dst_view.copy_(result);
}

const at::Tensor& HostConstant::on(const at::Device& device) const {
  if (!host_.defined() || host_.device() == device) return host_;
  if (!copy_.defined() || copy_.device() != device) copy_ = host_.to(device);
  return copy_;
}

int64_t axis_in(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

std::optional<std::vector<int64_t>> ints_from_input_or_attr(const OpSpec& spec, size_t i,
                                                            const std::string& attr) {
  if (spec.has_input(i)) {
    const Tensor* v = spec.value(i);
    D5_CHECK_ARG(v != nullptr, "{}: input {} ({}) must be a constant known when the operator is created",
                 spec.label(), i, attr);
    D5_CHECK_ARG(v->dtype() == DType::i64 || v->dtype() == DType::i32,
                 "{}: input {} ({}) must be int64 or int32", spec.label(), i, attr);
    // Read as integers: a double would round INT64_MAX (Slice's "to the end").
    if (v->dtype() == DType::i64)
      return std::vector<int64_t>(v->span<int64_t>().begin(), v->span<int64_t>().end());
    return std::vector<int64_t>(v->span<int32_t>().begin(), v->span<int32_t>().end());
  }
  if (spec.attrs.has(attr)) return spec.attrs.get_ints(attr);
  return std::nullopt;
}

at::Scalar scalar_of(const at::Tensor& t) {
  if (at::isFloatingType(t.scalar_type())) return t.item<double>();
  if (t.scalar_type() == at::kBool) return t.item<bool>();
  return t.item<int64_t>();
}

TorchOp::TorchOp(const OpSpec& spec, const OpSemantics& ref, OpDef def)
    : Operator(spec, ref.outputs),
      kernel_(std::move(def.kernel)),
      aten_(std::move(def.aten)),
      mask_(ref.differentiable),
      no_gradient_reason_(ref.no_gradient_reason),
      flops_(ref.flops),
      bytes_(ref.bytes),
      backward_flops_(ref.backward_flops) {}

Call TorchOp::make_call(std::span<const Tensor> inputs) const {
  Call c;
  c.in.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    c.in.push_back(spec_.has_input(i) ? view_of(inputs[i]) : at::Tensor());
  return c;
}

std::vector<at::Tensor> TorchOp::run(const Call& c) const {
  auto res = guarded(spec_, [&] { return kernel_(c); });
  D5_CHECK(res.size() == outputs_.size(), Internal, "{}: torch kernel returned {} outputs, expected {}",
           spec_.label(), res.size(), outputs_.size());
  for (size_t k = 0; k < res.size(); ++k) {
    if (!res[k].defined() && k < c.wanted.size() && !c.wanted[k]) continue;  // skipped: nobody reads it
    const auto want = dims_of(outputs_[k].shape);
    D5_CHECK(res[k].defined() && res[k].sizes() == at::IntArrayRef(want), Internal,
             "{}: torch kernel output {} has shape [{}], expected {}", spec_.label(), k,
             res[k].defined() ? fmt::format("{}", fmt::join(res[k].sizes(), ", ")) : "undefined",
             outputs_[k].shape.to_string());
  }
  return res;
}

void TorchOp::forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  check_inputs(inputs);
  D5_CHECK_ARG(outputs.size() == outputs_.size(), "{}: {} outputs given, the operator has {}", spec_.label(),
               outputs.size(), outputs_.size());
  at::NoGradGuard no_grad;
  Call c = make_call(inputs);
  for (auto& o : outputs) c.out.push_back(view_of(o));
  const auto res = run(c);
  guarded(spec_, [&] {
    for (size_t k = 0; k < res.size(); ++k)
      if (!res[k].is_same(c.out[k])) store_result(res[k], outputs[k], c.out[k]);
    return 0;
  });
}

void TorchOp::backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                       std::span<const Tensor>, std::span<Tensor> grad_inputs) {
  check_inputs(inputs);
  D5_CHECK_ARG(has_gradient(), "{}: {}", spec_.label(), no_gradient_reason_);
  Call c = make_call(inputs);
  std::vector<at::Tensor> leaves;
  std::vector<size_t> leaf_input;
  for (size_t i = 0; i < grad_inputs.size() && i < mask_.size(); ++i) {
    if (!mask_[i] || !grad_inputs[i].defined() || !c.in[i].defined()) continue;
    // The reference gives integer inputs of some ops (Relu, Neg, ...) a "gradient" that is always
    // zero (an integer output gets no upstream gradient); autograd has no integer leaves.
    if (!at::isFloatingType(c.in[i].scalar_type())) {
      std::memset(grad_inputs[i].data(), 0, grad_inputs[i].bytes());
      continue;
    }
    c.in[i] = c.in[i].detach().requires_grad_(true);
    leaves.push_back(c.in[i]);
    leaf_input.push_back(i);
  }
  if (leaves.empty()) return;
  c.replay = true;
  for (size_t k = 0; k < outputs_.size(); ++k)
    c.wanted.push_back(k < grad_outputs.size() && grad_outputs[k].defined());

  std::vector<at::Tensor> roots, seeds;
  {
    at::AutoGradMode grad_mode(true);
    auto res = run(c);
    guarded(spec_, [&] {
      for (size_t k = 0; k < res.size(); ++k) {
        if (!c.wanted[k] || !res[k].requires_grad()) continue;
        const auto t = scalar_type(outputs_[k].dtype);
        roots.push_back(res[k].scalar_type() == t ? res[k] : res[k].to(t));
        seeds.push_back(view_of(grad_outputs[k]));
      }
      return 0;
    });
  }
  std::vector<at::Tensor> grads(leaves.size());
  if (!roots.empty())
    grads = guarded(spec_, [&] {
      return torch::autograd::grad(roots, leaves, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                                   /*allow_unused=*/true);
    });
  // The seeds (views of the caller's upstream gradients) stay alive here, so a gradient that is one
  // of them is shared, not adoptable, and gets copied.
  guarded(spec_, [&] {
    for (size_t j = 0; j < leaves.size(); ++j) {
      Tensor& gx = grad_inputs[leaf_input[j]];
      at::Tensor dst = view_of(gx);
      // An input the outputs do not depend on (or only through zero-gradient paths) gets zeros.
      if (grads[j].defined())
        store_result(grads[j], gx, dst);
      else if (dst.numel() > 0)
        dst.zero_();
    }
    return 0;
  });
}

void add_torch_op(OpRegistry& r, const std::string& type, bool backward, Builder build, std::string notes) {
  auto create = [build = std::move(build)](const OpSpec& spec) -> OpCreateResult {
    // Throws InvalidArgument for a spec that is invalid for every backend.
    const OpSemantics ref = op_semantics(spec);
    Built b = guarded(spec, [&] { return build(spec, ref); });
    if (auto* why = std::get_if<std::string>(&b)) return *why;
    return std::make_unique<TorchOp>(spec, ref, std::move(std::get<OpDef>(b)));
  };
  r.add(OpImplementation{.op_type = type,
                         .backend = "torch",
                         .name = "torch",
                         .backward = backward,
                         .create = std::move(create),
                         .notes = std::move(notes)});
}

}  // namespace d5::torch_backend
