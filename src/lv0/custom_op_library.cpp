// Loading custom-operator libraries and calling them through the C ABI of custom_op.h.
#include <dlfcn.h>

#include <fmt/format.h>

#include "deep500/spi/custom_op_checks.h"
#include "deep500/op/custom_op.h"
#include "deep500/op/custom_op_compiler.h"
#include "deep500/core/error.h"

namespace d5 {

struct CustomOpLibrary::Symbols {
  decltype(&d5_custom_op_abi_version) abi_version = nullptr;
  decltype(&d5_custom_op_create) create = nullptr;
  decltype(&d5_custom_op_forward) forward = nullptr;
  decltype(&d5_custom_op_backward) backward = nullptr;
  decltype(&d5_custom_op_destroy) destroy = nullptr;
  decltype(&d5_custom_op_last_error) last_error = nullptr;
  decltype(&d5_custom_op_differentiable) differentiable = nullptr;  // optional
  decltype(&d5_custom_op_flops) flops = nullptr;                    // optional

  std::string error() const {
    const char* e = last_error();
    return e && *e ? e : "(the library gave no message)";
  }
};

namespace {

template <typename F>
F symbol(void* handle, const char* name) {
  dlerror();
  return reinterpret_cast<F>(dlsym(handle, name));
}

d5_tensor c_tensor(const Tensor& t, const TensorDesc& declared) {
  d5_tensor c{};
  c.desc = (t.defined() ? t.desc() : declared).to_c();
  c.data = t.defined() ? const_cast<void*>(t.data()) : nullptr;
  c.device_type = static_cast<int32_t>(t.device().kind);
  c.device_index = t.device().index;
  return c;
}

// One problem instance of a loaded library: owns the library's operator handle.
class CompiledCustomOp : public Operator {
 public:
  CompiledCustomOp(OpSpec spec, std::vector<TensorDesc> outputs, std::shared_ptr<const CustomOpLibrary> library,
                   const CustomOpLibrary::Symbols& symbols)
      : Operator(std::move(spec), std::move(outputs)), library_(std::move(library)), sym_(symbols) {
    std::vector<d5_tensor_desc> in, out;
    for (const auto& d : spec_.inputs) in.push_back(d.to_c());
    for (const auto& d : outputs_) out.push_back(d.to_c());
    handle_ =
        sym_.create(in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()));
    D5_CHECK_ARG(handle_ != nullptr, "{} ({}): the operator refused inputs {} / outputs {}: {}", spec_.label(),
                 implementation(), detail::describe(spec_.inputs), detail::describe(outputs_), sym_.error());
    if (sym_.differentiable) {
      std::vector<int32_t> mask(in.size(), 0);
      const int32_t status = sym_.differentiable(handle_, mask.data(), static_cast<int32_t>(mask.size()));
      if (status != D5_STATUS_OK) {
        const std::string message = sym_.error();
        sym_.destroy(handle_);
        raise(status, "differentiable", message);
      }
      for (int32_t m : mask) differentiable_.push_back(m != 0);
    } else {
      for (const auto& d : spec_.inputs) differentiable_.push_back(is_floating(d.dtype));
    }
    flops_ = sym_.flops ? sym_.flops(handle_) : 0;
  }
  ~CompiledCustomOp() override { sym_.destroy(handle_); }

  std::string implementation() const override { return "custom:" + library_->path().filename().string(); }
  std::vector<bool> differentiable_inputs() const override { return differentiable_; }
  std::string no_gradient_reason() const override {
    return "the custom operator marks no input differentiable";
  }
  double flops() const override { return flops_; }

  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override {
    check_inputs(inputs);
    detail::check_outputs(spec_, outputs_, outputs);
    auto in = c_tensors(inputs, spec_.inputs);
    auto out = c_tensors(outputs, outputs_);
    check(sym_.forward(handle_, in.data(), size(in), out.data(), size(out)), "forward");
  }

  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                std::span<const Tensor> outputs, std::span<Tensor> grad_inputs) override {
    check_inputs(inputs);
    detail::check_outputs(spec_, outputs_, outputs);
    D5_CHECK_ARG(grad_inputs.size() == spec_.inputs.size(), "{}: {} input gradients given for {} inputs",
                 spec_.label(), grad_inputs.size(), spec_.inputs.size());
    const auto g = detail::defined_grad_outputs(spec_, outputs_, grad_outputs);
    auto gout = c_tensors(g, outputs_);
    auto in = c_tensors(inputs, spec_.inputs);
    auto out = c_tensors(outputs, outputs_);
    auto gin = c_tensors(grad_inputs, spec_.inputs);
    check(sym_.backward(handle_, gout.data(), size(gout), in.data(), size(in), out.data(), size(out),
                        gin.data(), size(gin)),
          "backward");
  }

 private:
  static int32_t size(const std::vector<d5_tensor>& v) { return static_cast<int32_t>(v.size()); }
  static std::vector<d5_tensor> c_tensors(std::span<const Tensor> ts, const std::vector<TensorDesc>& declared) {
    std::vector<d5_tensor> c;
    for (size_t i = 0; i < ts.size(); ++i) c.push_back(c_tensor(ts[i], declared[i]));
    return c;
  }

  void check(int32_t status, const char* what) const {
    if (status != D5_STATUS_OK) raise(status, what, sym_.error());
  }
  // The library's status chooses the error kind; the library's message is kept verbatim.
  [[noreturn]] void raise(int32_t status, const char* what, const std::string& message) const {
    const std::string m = fmt::format("{} ({}): {} failed: {}", spec_.label(), implementation(), what, message);
    switch (status) {
      case D5_STATUS_INVALID_ARGUMENT:
        throw InvalidArgument(m);
      case D5_STATUS_UNIMPLEMENTED:
        throw Unimplemented(m);
      case D5_STATUS_FAILED:
        throw InternalError(m);
      default:
        throw InternalError(fmt::format("{} (unknown status {})", m, status));
    }
  }

  std::shared_ptr<const CustomOpLibrary> library_;
  const CustomOpLibrary::Symbols& sym_;
  void* handle_ = nullptr;
  std::vector<bool> differentiable_;
  double flops_ = 0;
};

}  // namespace

CustomOpLibrary::CustomOpLibrary(std::filesystem::path path, void* handle, std::unique_ptr<Symbols> symbols)
    : path_(std::move(path)), handle_(handle), symbols_(std::move(symbols)) {}

CustomOpLibrary::~CustomOpLibrary() { dlclose(handle_); }

std::shared_ptr<CustomOpLibrary> CustomOpLibrary::load(const std::filesystem::path& path) {
  // RTLD_LOCAL: every custom library exports the same entry-point names.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    D5_THROW(InvalidArgument, "cannot load custom operator library {}: {}", path.string(),
             e ? e : "unknown error");
  }
  auto s = std::make_unique<Symbols>();
  s->abi_version = symbol<decltype(s->abi_version)>(handle, "d5_custom_op_abi_version");
  if (!s->abi_version) {
    dlclose(handle);
    D5_THROW(
        InvalidArgument,
        "{} is not a deep500 custom operator library (no d5_custom_op_abi_version): define the entry points "
        "of deep500/op/custom_op.h, e.g. with D5_REGISTER_OP",
        path.string());
  }
  const int32_t version = s->abi_version();
  if (version != D5_CUSTOM_OP_ABI_VERSION) {
    dlclose(handle);
    D5_THROW(InvalidArgument,
             "{} was built for custom operator ABI version {}, but this deep500 speaks version {}: rebuild it "
             "against this deep500's custom_op.h",
             path.string(), version, D5_CUSTOM_OP_ABI_VERSION);
  }
  std::string missing;
  auto need = [&](auto& fn, const char* name) {
    fn = symbol<std::remove_reference_t<decltype(fn)>>(handle, name);
    if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  need(s->create, "d5_custom_op_create");
  need(s->forward, "d5_custom_op_forward");
  need(s->backward, "d5_custom_op_backward");
  need(s->destroy, "d5_custom_op_destroy");
  need(s->last_error, "d5_custom_op_last_error");
  if (!missing.empty()) {
    dlclose(handle);
    D5_THROW(InvalidArgument, "custom operator library {} lacks required entry points: {}", path.string(),
             missing);
  }
  s->differentiable = symbol<decltype(s->differentiable)>(handle, "d5_custom_op_differentiable");
  s->flops = symbol<decltype(s->flops)>(handle, "d5_custom_op_flops");
  return std::shared_ptr<CustomOpLibrary>(new CustomOpLibrary(path, handle, std::move(s)));
}

std::unique_ptr<Operator> CustomOpLibrary::create(OpSpec spec, std::vector<TensorDesc> output_descs) const {
  return std::make_unique<CompiledCustomOp>(std::move(spec), std::move(output_descs), shared_from_this(),
                                            *symbols_);
}

}  // namespace d5
