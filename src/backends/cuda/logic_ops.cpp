// Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and logical operators (And,
// Or, Xor, Not) with NumPy broadcasting and bool outputs, and Cast, on the backend's own kernels
// (dtype_kernels.cu). Comparisons run in the inputs' own type, as the reference's (logic.cpp):
// int64 compares exactly, NaN is unequal to everything. None of them has a gradient but Cast
// between floating types, whose gradient is the upstream gradient cast back.
#include <cstring>

#include "cuda_dims.h"
#include "deep500/spi/shape_rules.h"
#include "dtype_refusal.h"

namespace d5::cuda {

namespace {

bool is_logical(Logic k) { return k == Logic::and_ || k == Logic::or_ || k == Logic::xor_; }

class LogicOp : public CudaOp {
 public:
  LogicOp(const OpSpec& s, Logic kind) : CudaOp(s), kind_(kind) {
    const DType t = s.inputs[0].dtype;
    if (is_logical(kind))
      refuse_dtype(t, {DType::boolean}, "input 0");
    else if (kind == Logic::eq)
      refuse_dtype(t, {DType::f32, DType::f64, DType::i8, DType::i16, DType::i32, DType::i64, DType::u8,
                       DType::boolean},
                   "input 0");
    else
      refuse_dtype(t, {DType::f32, DType::f64, DType::i8, DType::i16, DType::i32, DType::i64, DType::u8}, "input 0");
    // The kernels index through the effective shapes (a legacy opset < 7 B aligned at 'axis').
    const BinaryShapes sh = binary_shapes(s, true);
    a_ = broadcast_map(sh.in[0], sh.out);
    b_ = broadcast_map(sh.in[1], sh.out);
  }
  std::string implementation() const override { return "cuda:kernel"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    compare(kind_, elem_of(in[0].dtype()), in[0].data(), a_, in[1].data(), b_, static_cast<bool*>(out[0].data()),
            out[0].numel(), nullptr);
    check_launch(spec_.type.c_str());
  }

 private:
  Logic kind_;
  StridedMap a_, b_;
};

class NotOp : public CudaOp {
 public:
  explicit NotOp(const OpSpec& s) : CudaOp(s) { refuse_dtype(s.inputs[0].dtype, {DType::boolean}, "input 0"); }
  std::string implementation() const override { return "cuda:kernel"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    logical_not(static_cast<const bool*>(in[0].data()), static_cast<bool*>(out[0].data()), out[0].numel(), op_stream());
    check_launch("Not");
  }
};

// Element `pos` of a device tensor of dtype t, as a double (for an error message).
double read_element(const void* data, DType t, int64_t pos) {
  const size_t es = dtype_size(t);
  uint64_t raw = 0;
  check_cuda(cudaMemcpy(&raw, static_cast<const unsigned char*>(data) + static_cast<size_t>(pos) * es, es,
                        cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  switch (t) {
    case DType::f32: {
      float f;
      std::memcpy(&f, &raw, sizeof f);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, &raw, sizeof d);
      return d;
    }
    case DType::f16: return half_to_float(static_cast<uint16_t>(raw));
    case DType::bf16: return bfloat16_to_float(static_cast<uint16_t>(raw));
    default: return static_cast<double>(raw);
  }
}

class CastOp : public CudaOp {
 public:
  explicit CastOp(const OpSpec& s) : CudaOp(s) {
    from_ = s.inputs[0].dtype;
    to_ = sem_.outputs[0].dtype;
    elem_of(from_);  // every deep500 dtype has a kernel type; refuses should one be added
    elem_of(to_);
  }
  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    run(in[0], out[0], from_, to_);
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined()) return;
    if (!gy[0].defined()) return zero_tensor(gx[0]);
    run(gy[0], gx[0], to_, from_);  // between floating types: never a range check
  }

 private:
  void run(const Tensor& x, Tensor& y, DType from, DType to) {
    const int64_t n = x.numel();
    if (from == to) return copy_device(y.data(), x.data(), x.bytes());
    // Only a floating value can miss an integer type's range: the one case that checks (and waits).
    const bool check = is_floating(from) && !is_floating(to) && to != DType::boolean;
    cast(elem_of(from), elem_of(to), x.data(), y.data(), n, check ? bad_.reset() : nullptr, nullptr);
    check_launch("Cast");
    if (!check) return;
    check_on_host([this, data = x.data(), from, to] {
      if (const auto pos = bad_.read())
        D5_THROW(InvalidArgument, "{}: value {} does not fit in {}", spec_.label(), read_element(data, from, *pos),
                 to_string(to));
    });
  }

  DType from_{}, to_{};
  FirstBad bad_;
};

}  // namespace

void register_logic_ops(OpRegistry& r) {
  static constexpr std::pair<const char*, Logic> kOps[] = {
      {"Equal", Logic::eq},          {"Less", Logic::lt},  {"Greater", Logic::gt}, {"LessOrEqual", Logic::le},
      {"GreaterOrEqual", Logic::ge}, {"And", Logic::and_}, {"Or", Logic::or_},     {"Xor", Logic::xor_}};
  for (const auto& [type, kind] : kOps)
    add_op(
        r, type, [kind](const OpSpec& s) { return std::make_unique<LogicOp>(s, kind); },
        {.any_dtype = true,
         .notes = is_logical(kind) ? "bool; NumPy broadcasting up to rank 8; own kernel"
                  : kind == Logic::eq
                      ? "f32, f64, i8, i16, i32, i64, u8, bool; NumPy broadcasting up to rank 8; own kernel"
                      : "f32, f64, i8, i16, i32, i64, u8; NumPy broadcasting up to rank 8; own kernel"});
  add_op(
      r, "Not", [](const OpSpec& s) { return std::make_unique<NotOp>(s); },
      {.any_dtype = true, .notes = "bool; own kernel"});
  add_op(
      r, "Cast", [](const OpSpec& s) { return std::make_unique<CastOp>(s); },
      {.backward = true,
       .any_dtype = true,
       .notes = "every dtype to every dtype, the reference's rules; a float to an integer checks the range (and "
                "waits for the device); gradient between floating types; own kernel"});
}

}  // namespace d5::cuda
