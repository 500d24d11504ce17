#pragma once
// Level 0: the Operator interface. An operator is created for one problem (an OpSpec: op type,
// attributes, input descriptors and the values of inputs that decide output shapes), so a
// backend can prepare everything (oneDNN primitives, workspace sizes) once, at creation, and
// forward/backward only compute.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "deep500/op/attributes.h"
#include "deep500/core/tensor.h"

namespace d5 {

struct OpSpec {
  std::string type;        // ONNX op type: "Conv", "Relu", ...
  std::string name;        // node name, for messages; may be empty
  Attributes attrs;
  std::vector<TensorDesc> inputs;
  // Values known when the operator is created (initializers, constants). Ops whose output
  // shapes depend on an input's values (Reshape's shape, Slice's starts, ...) need them here.
  // Size 0 or inputs.size(); an empty optional / undefined tensor means "not known".
  std::vector<std::optional<Tensor>> input_values;
  // ONNX allows omitting optional inputs in the middle ("" names); present[i] false marks one.
  std::vector<bool> present;
  int opset = 17;
  // Outputs the node asks for (ONNX nodes may omit trailing optional outputs such as Dropout's
  // mask or MaxPool's indices); -1 when unknown: the op produces every output it can.
  int num_outputs = -1;
  // The most scratch memory (bytes, beyond inputs and outputs) an implementation may use for one
  // call, as a cuDNN user caps an algorithm's workspace: an implementation that needs more refuses,
  // so the registry falls back to a leaner one. -1: each implementation's own default policy.
  int64_t workspace_limit = -1;

  bool has_input(size_t i) const { return i < inputs.size() && (present.empty() || present[i]); }
  const Tensor* value(size_t i) const;  // nullptr when not known
  // "Conv 'conv1'" or "Conv": prefix for every message about this op.
  std::string label() const;
};

// What an implementation says when asked to handle a spec.
struct Refusal {
  std::string implementation;
  std::string reason;
};

class Operator {
 public:
  virtual ~Operator() = default;

  const OpSpec& spec() const { return spec_; }
  const std::vector<TensorDesc>& output_descs() const { return outputs_; }
  // "reference", "onednn:jit:avx512_core", ... : what actually runs.
  virtual std::string implementation() const = 0;
  // Where its inputs, outputs and gradients live: an executor places them there and copies a
  // tensor that arrives from another device (docs/devices.md).
  virtual Device device() const { return Device::cpu(); }

  // inputs match spec().inputs (an absent optional input is an undefined Tensor); outputs are
  // allocated by the caller from output_descs(), on device().
  //
  // Outputs may be rebound. An operator may replace an *owned* output tensor (allocated, or
  // adopted) with another owned tensor of the same descriptor instead of writing into it: a native
  // library that returns a fresh result (ATen) then hands it over without a copy (Tensor::adopt).
  // A *view* output (Tensor::view: caller memory) is always written in place. Callers therefore
  // read outputs from the span after the call, never through a pointer to the old buffer or a
  // copy of the Tensor taken before the call.
  virtual void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) = 0;

  // Gradient support. An empty mask means the op has no gradient (Shape, comparisons, ArgMax,
  // ...), and no_gradient_reason() says why.
  virtual std::vector<bool> differentiable_inputs() const { return {}; }
  virtual std::string no_gradient_reason() const { return "operator has no gradient"; }
  bool has_gradient() const;

  // Reverse mode for the most recent forward() of this instance (ops may keep state from it:
  // pooling argmax, normalization statistics, dropout masks, RNN gates).
  // grad_outputs: one per output; an undefined Tensor means zero gradient.
  // grad_inputs: allocated by the caller for differentiable inputs (others undefined); fully
  // overwritten, not accumulated, or (owned ones) rebound, as forward's outputs.
  virtual void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, std::span<Tensor> grad_inputs);

  // Work of one forward call, for GFLOP/s and GB/s reports. flops counts a fused multiply-add as
  // two operations; bytes is the minimum traffic: every input read and every output written once.
  virtual double flops() const { return 0; }
  virtual double bytes() const;
  virtual double backward_flops() const { return 2 * flops(); }
  // Scratch memory one forward call uses beyond inputs and outputs (im2col matrices, a library's
  // scratchpad); 0 when none, -1 when the implementation cannot tell (a framework's allocator).
  virtual int64_t workspace_bytes() const { return 0; }

  // Convenience: allocate outputs and run forward.
  std::vector<Tensor> run_forward(std::span<const Tensor> inputs);
  // Convenience: allocate grad_inputs for differentiable inputs and run backward.
  std::vector<Tensor> run_backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                                   std::span<const Tensor> outputs);

 protected:
  Operator(OpSpec spec, std::vector<TensorDesc> outputs)
      : spec_(std::move(spec)), outputs_(std::move(outputs)) {}
  // Checks that runtime inputs match the creation-time descriptors (named error otherwise).
  void check_inputs(std::span<const Tensor> inputs) const;

  OpSpec spec_;
  std::vector<TensorDesc> outputs_;
};

// Each defined tensor of `ts` on `device` (itself where it is there already): what callers that
// hold host tensors give an operator of another device, and how they read its results.
std::vector<Tensor> to_device(std::span<const Tensor> ts, Device device);

}  // namespace d5
