#pragma once
// The LibTorch graph executor (docs/torch-executor.md): a Network run as one chain of ATen calls,
// trained with LibTorch's autograd.
//
// Each node is the torch backend's operator for its spec (a TorchOp), whose kernel runs directly on
// at::Tensors; nodes the backend refuses run their reference operator (or a custom operator)
// inside the same autograd graph (operator_autograd.h) and are listed by fallbacks().
//
// Parameters and constants are at::Tensor views of the network's own d5 buffers (at::from_blob),
// made again only when the network holds another buffer for the name (after feed_tensor), so an
// optimizer that writes parameters in place is seen without any copy. In a training step the
// parameters are autograd leaves whose .grad views the d5 gradient tensor the network stores under
// Network::gradient_name(param): the executor zeroes it and autograd accumulates into it, so
// gradients land where optimizers read them without a copy. Those gradient tensors are reused by
// every step (clone one to keep it).
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/graph_executor.h"

namespace d5::torch_backend {

class TorchOp;

class TorchExecutor final : public GraphExecutor {
 public:
  TorchExecutor(Network& network, const ExecutorOptions& options);
  ~TorchExecutor() override;

  std::string backend() const override { return "torch"; }
  TensorMap inference(const TensorMap& feeds) override;
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override;
  std::map<std::string, std::string> implementations() const override;
  std::vector<std::pair<std::string, std::string>> fallbacks() const override;
  // peak_rss_bytes: the process's RSS high-water mark over the last run (reset before it; the
  // process-wide peak where the kernel refuses the reset). ATen's CPU allocator keeps no byte
  // counter, so peak_tensor_bytes is -1.
  ExecutorMemory memory() const override;

  // How many times a parameter or constant was wrapped as an at::Tensor (once per buffer): tests
  // check that in-place updates cause none and feed_tensor causes one.
  int64_t wrap_count() const { return wrap_count_; }
  // How many times the graph was planned (operators created): once per network version.
  int64_t plan_count() const { return plan_count_; }

 private:
  struct Step;
  struct Binding;

  void plan();
  void bind_values(bool training);
  void bind_feeds(const TensorMap& feeds);
  // Runs every step; false when an event stopped the run. keep_slot (the loss) outlives its last
  // reader.
  bool forward(bool training, int keep_slot);
  TensorMap store_outputs(const std::vector<std::string>& names);
  void backward(const at::Tensor& loss);

  ExecutorOptions options_;
  uint64_t planned_version_ = 0;
  bool planned_ = false;
  std::vector<Step> steps_;
  std::vector<Binding> bindings_;              // initializers and folded values read by the steps
  std::map<std::string, int> slot_of_;         // tensor name -> index into env_
  std::vector<std::pair<std::string, int>> input_slots_;
  std::vector<at::Tensor> env_;                // the current value of every slot
  std::vector<bool> keep_;                     // slots never released during a run (graph outputs, ...)
  std::vector<std::pair<std::string, std::string>> fallbacks_;
  int64_t wrap_count_ = 0;
  int64_t plan_count_ = 0;
};

}  // namespace d5::torch_backend
