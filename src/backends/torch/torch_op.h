#pragma once
// The LibTorch backend's one operator class. Every ONNX operator is a TorchOp running a kernel:
// a lambda, built once per OpSpec, that calls ATen on at::Tensor views of the d5 tensors'
// buffers (at::from_blob: d5 buffers are 64-byte aligned and row-major, so nothing is copied).
// A result ATen allocated is handed to an owned output tensor as it is (store_result); only view
// outputs and results that are not plain, solely owned buffers are copied.
//
// What the ONNX semantics of a spec are (output descriptors, which inputs have gradients, the
// work counts, and InvalidArgument for invalid specs) comes from op_semantics (op/op_semantics.h),
// read once when the TorchOp is created: the rules are the oracle's, so the two backends cannot
// disagree on them. Nothing of the oracle runs after creation; every forward and backward
// computes with ATen.
//
// Backward recomputes forward. forward() runs the kernel with autograd off, so no graph is
// recorded and forward-only benchmarks time ATen's inference path. backward() replays the kernel
// on the inputs it is given, with autograd on and the differentiable inputs as leaves, and calls
// torch::autograd::grad with the upstream gradients (an undefined one counts as zero). A backward
// call therefore costs one extra forward compared with a framework that keeps the graph of the
// last forward. Kernels that draw random numbers (Dropout) keep what they drew for the replay.
#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "deep500/op/op_registry.h"
#include "deep500/op/op_semantics.h"
#include "deep500/op/operator.h"

namespace d5::torch_backend {

// What a kernel sees.
struct Call {
  std::vector<at::Tensor> in;  // one per spec input; undefined where an optional input is absent
  // forward: views of the caller's output buffers, which a kernel may fill itself (ATen's out=
  // variants) and return, saving a copy; replay: undefined.
  std::vector<at::Tensor> out;
  // replay: the outputs that have an upstream gradient; a graph executor: the outputs its node
  // names. Where given and false, a kernel may return an undefined tensor instead of the output.
  std::vector<bool> wanted;
  bool replay = false;
  // With replay: a graph executor's recording forward (TorchExecutor), not the recomputation of an
  // earlier forward, so kernels that keep random draws for the replay (Dropout) draw afresh.
  bool fresh = false;

  // Whether output k can be written in place (plain forward only: out= variants record no graph).
  bool writable(size_t k) const { return !replay && k < out.size() && out[k].defined(); }
};

// Returns one tensor per output (shape of the output descriptor; any dtype, converted on copy).
using Kernel = std::function<std::vector<at::Tensor>(const Call&)>;

// A kernel and the name of the ATen function it runs ("at::convolution"), or why this backend
// cannot run the spec (a refusal).
struct OpDef {
  Kernel kernel;
  std::string aten;
};
using Built = std::variant<OpDef, std::string>;
// ref: the semantics of the spec (validated; output descriptors).
using Builder = std::function<Built(const OpSpec& spec, const OpSemantics& ref)>;

class TorchOp final : public Operator {
 public:
  TorchOp(const OpSpec& spec, const OpSemantics& ref, OpDef def);

  std::string implementation() const override { return "torch:" + aten_; }
  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  std::vector<bool> differentiable_inputs() const override { return mask_; }
  std::string no_gradient_reason() const override { return no_gradient_reason_; }
  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                std::span<const Tensor> outputs, std::span<Tensor> grad_inputs) override;
  // The oracle's counts: the work of the operator, not of how this backend schedules it (the
  // recomputed forward in backward is not counted).
  double flops() const override { return flops_; }
  double bytes() const override { return bytes_; }
  double backward_flops() const override { return backward_flops_; }

  // The kernel on ATen tensors directly, for a graph executor that builds one autograd graph of a
  // whole network: no d5 buffers, no copies. Outputs are checked as in forward (count, shapes);
  // their dtypes may differ from the descriptors' (callers convert).
  std::vector<at::Tensor> run_aten(const Call& c) const { return run(c); }

 private:
  Call make_call(std::span<const Tensor> inputs) const;
  std::vector<at::Tensor> run(const Call& c) const;  // ATen errors become InvalidArgument

  Kernel kernel_;
  std::string aten_;
  std::vector<bool> mask_;
  std::string no_gradient_reason_;
  double flops_, bytes_, backward_flops_;
};

// Registers `type` for the torch backend: the factory reads the spec's semantics (which validates
// it), asks `build` for a kernel, and returns a TorchOp or the builder's refusal.
void add_torch_op(OpRegistry& r, const std::string& type, bool backward, Builder build, std::string notes);

// ---- helpers for builders and kernels --------------------------------------------------------

at::ScalarType scalar_type(DType t);
// The inverse; InvalidArgument for an ATen dtype deep500 has not.
DType dtype_of(at::ScalarType t);
// A view of t's buffer (no copy); undefined for an undefined tensor, an empty tensor for numel 0.
at::Tensor view_of(const Tensor& t);
// The same for a buffer ATen reads on `where` (a d5 tensor on a device, torch_device.h).
at::Tensor view_on(const Tensor& t, const at::Device& where);
std::vector<int64_t> dims_of(const Shape& s);
// Hands an ATen result (the shape of dst, any dtype) to dst without a copy where the operator
// contract allows it: an owned dst is rebound to the result's buffer (Tensor::adopt, the
// at::Tensor kept alive) when the result is the sole owner of a contiguous, 64-byte-aligned
// storage of exactly dst's dtype and size. Otherwise (a view dst, a shared or converted result)
// the result is copied into dst_view, the view of dst's buffer.
bool adoptable(const at::Tensor& result, const Tensor& dst);
void store_result(const at::Tensor& result, Tensor& dst, const at::Tensor& dst_view);
// An owned d5 tensor of `desc` holding `result` (of desc's shape, any dtype): adopted under the same
// conditions as adoptable(), else a new tensor with the result copied (and converted) into it.
Tensor to_owned(const at::Tensor& result, const TensorDesc& desc);
// The same on a device: `result` is on `where`, the tensor returned on `device` (its d5 name),
// always a copy there (d5 adopts host buffers only).
Tensor to_owned(const at::Tensor& result, const TensorDesc& desc, const Device& device, const at::Device& where);
// A tensor a kernel makes once, on the host, when its operator is created (an index table, a
// divisor), read on the device of the tensors the kernel meets: copied there once, then reused,
// so that a kernel on a GPU neither mixes devices nor copies it again at every call.
class HostConstant {
 public:
  HostConstant() = default;
  explicit HostConstant(at::Tensor host) : host_(std::move(host)) {}
  const at::Tensor& on(const at::Device& device) const;

 private:
  at::Tensor host_;
  mutable at::Tensor copy_;  // on the last device asked for other than the host
};

// ONNX axis in [-rank, rank) to [0, rank) (the reference has validated it).
int64_t axis_in(int64_t axis, size_t rank);
// Integers from constant input i when present (the reference has checked that it is known),
// else from attribute `attr`, else nullopt: the attributes that later opsets turned into inputs.
std::optional<std::vector<int64_t>> ints_from_input_or_attr(const OpSpec& spec, size_t i,
                                                            const std::string& attr);
// A one-element input as a Scalar of its own kind (integer or floating).
at::Scalar scalar_of(const at::Tensor& t);

// A kernel computing output 0 with `f(in)` or, in a plain forward, straight into the output
// buffer with `f_out(y, in)` (an ATen out= variant).
template <typename F, typename FOut>
Kernel pointwise(F f, FOut f_out) {
  return [f, f_out](const Call& c) -> std::vector<at::Tensor> {
    if (c.writable(0)) {
      at::Tensor y = c.out[0];
      return {f_out(y, c.in)};
    }
    return {f(c.in)};
  };
}
// A kernel with output 0 = f(in), everything else by the caller's copy.
template <typename F>
Kernel single(F f) {
  return [f](const Call& c) -> std::vector<at::Tensor> { return {f(c.in)}; };
}

// Registration of the op families (one file each).
void register_elementwise_ops(OpRegistry& r);  // unary, binary, variadic, comparisons, Where, Cast
void register_nn_ops(OpRegistry& r);           // Conv, ConvTranspose, Gemm, MatMul, pooling
void register_norm_ops(OpRegistry& r);         // normalization, LRN, Softmax, LogSoftmax
void register_reduce_ops(OpRegistry& r);       // reductions, ArgMax, losses, Dropout
void register_movement_ops(OpRegistry& r);     // shape and data-movement ops, Shape, Constant
void register_rnn_ops(OpRegistry& r);          // LSTM, GRU, RNN
void register_indexing_ops(OpRegistry& r);     // GatherElements, ScatterElements, TopK, Trilu, Range
void register_spectral_ops(OpRegistry& r);     // DFT, STFT
void register_ctc_ops(OpRegistry& r);          // CTCLoss

}  // namespace d5::torch_backend
