#pragma once
// Level 1: graph executors run a Network on one backend (docs/executors.md).
//
// inference(feeds) evaluates the graph outputs; inference_and_backprop(feeds, loss) also runs
// reverse mode from a scalar loss and stores every parameter's gradient in the network under
// Network::gradient_name(param), where Level-2 optimizers read them. Parameters are read from the
// network at every call, so an optimizer that writes them (in place or with feed_tensor) is seen by
// the next step.
//
// Events are hooks user code attaches to time, dump tensors or stop early; an executor calls them
// in the order documented on ExecutorEvent. Returning false from before/after_operator stops the
// run after that point: the call returns what was computed so far and stopped() is true.
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/net/network.h"
#include "deep500/core/tensor.h"

namespace d5 {

using TensorMap = std::map<std::string, Tensor>;

enum class Pass { forward, backward };

class ExecutorEvent {
 public:
  virtual ~ExecutorEvent() = default;
  virtual void before_executor(const TensorMap& /*feeds*/) {}
  // Per node; in the backward pass, inputs are the gradients flowing into the node's outputs and
  // outputs the gradients it produces for its inputs (undefined where none).
  virtual bool before_operator(const Node& /*node*/, Pass /*pass*/, std::span<const Tensor> /*inputs*/) {
    return true;
  }
  virtual bool after_operator(const Node& /*node*/, Pass /*pass*/, std::span<const Tensor> /*outputs*/) {
    return true;
  }
  virtual void after_inference(const TensorMap& /*outputs*/) {}
  virtual void after_backprop(const TensorMap& /*gradients*/) {}  // gradient name -> value
  virtual void after_executor(const TensorMap& /*outputs*/) {}
};

// What the last run used, for memory metrics.
struct ExecutorMemory {
  int64_t peak_tensor_bytes = -1;  // bytes of tensors alive at once (executor's own accounting)
  int64_t peak_rss_bytes = -1;     // process high-water mark over the run; -1 when not measured
  // Copies between devices the last call made (operator executors: at device boundaries, and of
  // what the caller reads back); 0 when everything ran where it lives.
  int64_t transfers = 0;
  int64_t transfer_bytes = 0;
};

class GraphExecutor {
 public:
  explicit GraphExecutor(Network& network) : network_(network) {}
  virtual ~GraphExecutor() = default;
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  Network& network() { return network_; }
  virtual std::string backend() const = 0;

  // feeds: every graph input of the network (InvalidArgument naming a missing, unexpected or
  // mis-shaped one). Returns the graph outputs, also stored in the network.
  virtual TensorMap inference(const TensorMap& feeds) = 0;
  // loss: a tensor of one element computed from the feeds. Returns the graph outputs (and the
  // loss); parameter gradients are stored in the network.
  virtual TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) = 0;

  // Per node, what runs it ("onednn:jit:avx512_core", "reference (fallback: ...)"): the breakdown
  // and `d5 net` show it.
  virtual std::map<std::string, std::string> implementations() const = 0;
  // Nodes that run on another implementation than the executor's backend, with the reason.
  virtual std::vector<std::pair<std::string, std::string>> fallbacks() const { return {}; }
  virtual ExecutorMemory memory() const { return {}; }
  // Whether the gradients a backward after_operator event receives are the executor's own tensors,
  // valid with their values until the call ends, so that an event may keep them and act on them
  // later (OverlappedAllreduce starts an allreduce in place and completes it after backprop).
  // False where they are views valid only during the event (the torch executor's, of tensors
  // inside LibTorch's autograd).
  virtual bool backward_event_tensors_persist() const { return true; }
  // Resident inputs and outputs (d5 net --resident-io). feed_devices: per graph input, the device
  // the plan for `loss` ("" = inference) reads it on, so that a caller may place the feed there
  // once; empty where the executor reads every feed on the host. keep_outputs_on_device: from now
  // on, graph outputs are returned where they are made instead of copied to the host; false
  // where the executor cannot.
  virtual std::map<std::string, Device> feed_devices(const std::string& /*loss*/ = "") { return {}; }
  virtual bool keep_outputs_on_device() { return false; }

  void add_event(std::shared_ptr<ExecutorEvent> event) { events_.push_back(std::move(event)); }
  void remove_event(const std::shared_ptr<ExecutorEvent>& event) { std::erase(events_, event); }
  const std::vector<std::shared_ptr<ExecutorEvent>>& events() const { return events_; }
  void clear_events() { events_.clear(); }
  bool stopped() const { return stopped_; }

 protected:
  // Checks feeds against the network's graph inputs (names, descriptors).
  void check_feeds(const TensorMap& feeds) const;
  void fire_before_executor(const TensorMap& feeds);
  // false when an event asked to stop (also sets stopped()).
  bool fire_before_operator(const Node& node, Pass pass, std::span<const Tensor> inputs);
  bool fire_after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs);
  void fire_after_inference(const TensorMap& outputs);
  void fire_after_backprop(const TensorMap& gradients);
  void fire_after_executor(const TensorMap& outputs);

  Network& network_;
  std::vector<std::shared_ptr<ExecutorEvent>> events_;
  bool stopped_ = false;
};

struct ExecutorOptions {
  bool deterministic = false;
  // Scratch memory each operator may use per call (OpSpec::workspace_limit); -1: no limit.
  int64_t workspace_limit = -1;
  // Op type -> the implementation that must run each of its nodes ("Conv" ->
  // "reference:batched-im2col"): no fallback for those nodes (implementation_pins.h). Executors
  // that do not run registry operators (torch) refuse pins.
  std::map<std::string, std::string> pins = {};
  // Operator executors: inference keeps tensors in the layout their producer's backend chose while
  // every consumer takes it (OperatorExecutorOptions::native_layouts). False: plain tensors
  // between all operators, each backend reordering at its own boundary.
  bool native_layouts = true;
  // Where the executor keeps its tensors ("cuda:0"); empty: where its backend runs. Only an
  // executor registered as taking a device accepts one (the torch executor, docs/torch-executor.md);
  // make_executor refuses a device for the others, which run on their backend's own.
  std::string device = {};
  // Record a step once and replay it (docs/cuda-graphs.md): the executor is a ReplayingExecutor
  // around the backend's, with the backend's StepRecorder (CUDA graphs for cuda). make_executor
  // refuses it (Unimplemented) for a backend without a recorder.
  bool cuda_graphs = false;
};

using ExecutorFactory = std::function<std::unique_ptr<GraphExecutor>(Network&, const ExecutorOptions&)>;

// Executors are registered per backend name (the backend libraries register theirs with the
// builtin operators). make_executor throws Unimplemented naming the backend when it has none.
// takes_device: the factory honours ExecutorOptions::device.
void register_executor(const std::string& backend, ExecutorFactory factory, bool takes_device = false);
std::vector<std::string> executor_backends();
std::unique_ptr<GraphExecutor> make_executor(Network& network, const std::string& backend,
                                             const ExecutorOptions& options = {});

}  // namespace d5
