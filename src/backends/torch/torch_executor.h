#pragma once
// The LibTorch graph executor (docs/torch-executor.md): a Network run as one chain of ATen calls,
// trained with LibTorch's autograd.
//
// Each node is the torch backend's operator for its spec (a TorchOp), whose kernel runs directly on
// at::Tensors; custom operators and the reference operators of nodes the backend refuses run
// inside the same autograd graph (apply_custom_op, custom_autograd.h); the latter are listed by
// fallbacks().
//
// Parameters and constants are at::Tensor views of the network's own d5 buffers (at::from_blob),
// made again only when the network holds another buffer for the name (after feed_tensor), so an
// optimizer that writes parameters in place is seen without any copy. In a training step the
// parameters are autograd leaves, and their gradients land in d5 tensors the network stores under
// Network::gradient_name(param) (see GradientSink). A gradient tensor someone else put in the
// network is replaced, never written.
//
// On a device (ExecutorOptions::device, "cuda:0"; torch_device.h) every tensor lives there: a
// parameter or constant on the host is moved once and the network holds the moved one, feeds on
// another device are copied in, graph outputs (the loss included) are copied to the host for the
// caller, and gradients stay on the device. memory().transfers counts those copies; a steady-state
// training step copies only its feeds and outputs. Every node must then run on an ATen kernel:
// reference fallbacks and custom operators run host code, and are refused with the node named.
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/net/graph_executor.h"
#include "torch_device.h"

namespace d5::torch_backend {

class TorchOp;

// How gradients reach the network's d5 gradient tensors.
enum class GradientSink {
  // torch::autograd::grad returns each parameter's gradient in the buffer ATen computed it in (the
  // one a hand-written loop's AccumulateGrad would steal), and the network gets a new d5 tensor
  // owning that buffer (Tensor::adopt): no copy. A gradient ATen gives as a strided view (a
  // transposed Gemm weight's) is copied, as AccumulateGrad would clone it. The network holds no
  // gradient values while the step runs: the last step's are released at its start, so their
  // memory is reused as when a hand-written loop resets .grad (a backward pass the events stop
  // leaves none).
  adopt,
  // Each leaf's .grad is a view of a d5 tensor the executor made once and keeps in the network,
  // zeroed before the step, and AccumulateGrad adds into it: no allocation per step, but a
  // zeroing pass and an add where a hand-written loop steals. The tensor is reused by every step
  // (clone one to keep it).
  accumulate,
};

class TorchExecutor final : public GraphExecutor {
 public:
  TorchExecutor(Network& network, const ExecutorOptions& options);
  ~TorchExecutor() override;

  std::string backend() const override { return "torch"; }
  TensorMap inference(const TensorMap& feeds) override;
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override;
  std::map<std::string, std::string> implementations() const override;
  std::vector<std::pair<std::string, std::string>> fallbacks() const override;
  // peak_rss_bytes: with set_measure_rss(true), the process's RSS high-water mark over the last
  // call (reset before it; the process-wide peak where the kernel refuses the reset), else -1.
  // ATen's CPU allocator keeps no byte counter, so peak_tensor_bytes is always -1.
  ExecutorMemory memory() const override { return memory_; }
  // Backward events see views of gradients inside autograd, some of them copies made for the event.
  bool backward_event_tensors_persist() const override { return false; }
  // Off by default: the two /proc accesses cost tens of microseconds, which every timed call
  // would count as executor time (as OperatorExecutorOptions::measure_rss).
  void set_measure_rss(bool measure) { measure_rss_ = measure; }

  // The default is adopt: each step's gradients are new tensors, as other executors' are.
  void set_gradient_sink(GradientSink sink) { gradient_sink_ = sink; }
  GradientSink gradient_sink() const { return gradient_sink_; }

  // How many times a parameter or constant was wrapped as an at::Tensor (once per buffer): tests
  // check that in-place updates cause none and feed_tensor causes one.
  int64_t wrap_count() const { return wrap_count_; }
  // How many times the graph was planned (operators created): once per network version.
  int64_t plan_count() const { return plan_count_; }
  const TorchPlacement& placement() const { return placement_; }
  // On a device: every graph input is read there, and outputs may stay there. On the host: none.
  std::map<std::string, Device> feed_devices(const std::string& loss = "") override;
  bool keep_outputs_on_device() override;

 private:
  struct Step;
  struct Binding;

  void plan();
  // Which steps run for a call: those the graph outputs or the loss (slot; -1 in inference)
  // depend on. Cached per loss until the next plan.
  const std::vector<bool>& active_steps(int loss_slot);
  void begin_memory();
  void end_memory();
  void bind_values(bool training);
  void bind_feeds(const TensorMap& feeds);
  // Runs the active steps; false when an event stopped the run. keep_slot (the loss) outlives its
  // last reader.
  bool forward(bool training, int keep_slot);
  TensorMap store_outputs(const std::vector<std::string>& names);
  void backward(const at::Tensor& loss);
  // t on the executor's device: itself when it is there, else a copy, counted as a transfer.
  Tensor on_device(const Tensor& t);
  void count_transfer(size_t bytes);  // one copy between the host and the device
  at::Tensor view_keeping(const Tensor& t) const;
  Tensor owned(const at::Tensor& result, const TensorDesc& desc) const;

  ExecutorOptions options_;
  TorchPlacement placement_;
  uint64_t planned_version_ = 0;
  bool planned_ = false;
  std::vector<Step> steps_;
  std::vector<Binding> bindings_;              // initializers and folded values read by the steps
  std::map<std::string, int> slot_of_;         // tensor name -> index into env_
  std::vector<std::pair<std::string, int>> input_slots_;
  std::vector<at::Tensor> env_;                // the current value of every slot
  std::vector<bool> keep_;                     // slots never released during a run (graph outputs, ...)
  std::vector<std::pair<std::string, std::string>> fallbacks_;
  std::map<int, std::vector<bool>> active_;
  bool measure_rss_ = false;
  bool outputs_on_device_ = false;
  ExecutorMemory memory_;
  GradientSink gradient_sink_ = GradientSink::adopt;
  int64_t wrap_count_ = 0;
  int64_t plan_count_ = 0;
};

}  // namespace d5::torch_backend
