// Operators whose output is known at creation: Constant (every form of its value attribute but
// the string and sparse ones, which the oracle rejects), ConstantOfShape (the shape input known
// at creation) and Shape (start/end of opset 15). The value is copied to the device once, when
// the operator is created; forward copies (or fills) it into the output on the device.
#include <cstring>

#include "dtype_refusal.h"

namespace d5::cuda {

namespace {

// Copies host bytes to a new device buffer (blocking: at creation only).
DeviceBuffer upload_bytes(const void* src, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes > 0) check_cuda(cudaMemcpy(b.get(), src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (constant)");
  return b;
}

// Constant's value as the host bytes of its output (whose dtype and shape the oracle gave):
// the reference's forms (ops/shape_ops.cpp constant_value).
std::vector<unsigned char> constant_bytes(const OpSpec& s, const TensorDesc& out) {
  const auto& a = s.attrs;
  std::vector<unsigned char> bytes(out.bytes());
  auto put = [&](const void* src, size_t n) {
    D5_CHECK(n == bytes.size(), Internal, "{}: the value holds {} bytes, its output {}", s.label(), n, bytes.size());
    if (n > 0) std::memcpy(bytes.data(), src, n);
  };
  if (a.has("value")) {
    const Tensor t = a.get_tensor("value");
    refuse_if(t.device().kind != DeviceKind::cpu, "attribute 'value' is not on the host");
    put(t.data(), t.bytes());
  } else if (a.has("value_float")) {
    const auto v = static_cast<float>(a.get_float("value_float"));
    put(&v, sizeof v);
  } else if (a.has("value_int")) {
    const int64_t v = a.get_int("value_int");
    put(&v, sizeof v);
  } else if (a.has("value_floats")) {
    const auto d = a.get_floats("value_floats");
    const std::vector<float> v(d.begin(), d.end());
    put(v.data(), v.size() * sizeof(float));
  } else if (a.has("value_ints")) {
    const auto v = a.get_ints("value_ints");
    put(v.data(), v.size() * sizeof(int64_t));
  } else {
    throw Refused("no numeric value attribute");  // the oracle rejects the others first
  }
  return bytes;
}

// Forward copies a device buffer made at creation into the output.
class StoredOp : public CudaOp {
 public:
  StoredOp(const OpSpec& s, const char* impl) : CudaOp(s), impl_(impl) {}
  std::string implementation() const override { return impl_; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    copy_device(out[0].data(), value_.get(), out[0].bytes());
  }

  DeviceBuffer value_;

 private:
  const char* impl_;
};

std::unique_ptr<Operator> make_constant(const OpSpec& s) {
  auto op = std::make_unique<StoredOp>(s, "cuda:copy");
  const auto bytes = constant_bytes(s, op->output_descs()[0]);
  op->value_ = upload_bytes(bytes.data(), bytes.size());
  return op;
}

std::unique_ptr<Operator> make_shape(const OpSpec& s) {
  auto op = std::make_unique<StoredOp>(s, "cuda:copy");
  // The oracle's output holds end - start values; start as the reference clamps it.
  const auto& dims = s.inputs[0].shape.dims();
  const auto r = static_cast<int64_t>(dims.size());
  const int64_t start = s.attrs.get_int("start", 0);
  const int64_t begin = std::clamp(start < 0 ? start + r : start, int64_t{0}, r);
  const int64_t count = op->output_descs()[0].numel();
  const std::vector<int64_t> v(dims.begin() + begin, dims.begin() + begin + count);
  op->value_ = upload_bytes(v.data(), v.size() * sizeof(int64_t));
  return op;
}

class ConstantOfShapeOp : public CudaOp {
 public:
  explicit ConstantOfShapeOp(const OpSpec& s) : CudaOp(s) {
    const TensorDesc& out = sem_.outputs[0];
    elem_ = static_cast<int>(dtype_size(out.dtype));
    if (s.attrs.has("value")) {
      const Tensor t = s.attrs.get_tensor("value");
      refuse_if(t.device().kind != DeviceKind::cpu || t.bytes() != static_cast<size_t>(elem_),
                "attribute 'value' must hold one element on the host");
      std::memcpy(&bits_, t.data(), t.bytes());  // little-endian: the low bytes are the word
    }
  }
  std::string implementation() const override { return "cuda:kernel"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    fill_words(out[0].data(), out[0].numel(), bits_, elem_, op_stream());
    check_launch("fill_words");
  }

 private:
  int elem_ = 4;
  uint64_t bits_ = 0;  // absent value: a float 0, all zero bits
};

}  // namespace

void register_constant_ops(OpRegistry& r) {
  add_op(r, "Constant", make_constant,
         {.any_dtype = true, .notes = "every dtype; the value is copied to the device at creation"});
  add_op(
      r, "ConstantOfShape", [](const OpSpec& s) { return std::make_unique<ConstantOfShapeOp>(s); },
      {.any_dtype = true, .notes = "every dtype; the shape input must be known at creation; own kernel"});
  add_op(r, "Shape", make_shape,
         {.any_dtype = true, .notes = "any input dtype; the shape is copied to the device at creation"});
}

}  // namespace d5::cuda
