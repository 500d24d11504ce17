#pragma once
// Level 1: a graph executor over Level-0 operators (docs/executors.md). It creates one Operator
// per node that is not folded, asking a list of backends in order (the first that accepts runs
// the node; the others' refusals are reported as the fallback), runs them in topological order,
// and differentiates with each operator's backward in reverse order.
//
// ReferenceExecutor is this executor on {"reference"}; the oneDNN backend registers it as executor
// "onednn" on {"onednn", "reference"}.
// Any operator registered for a backend in the list, custom operators included, runs in it.
//
// Tensor lifetimes are planned once per network version: an intermediate is freed as soon as
// its last consumer ran; in a training step, the forward values a backward needs stay alive
// until that backward ran, and each gradient is freed once its producer consumed it.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/net/graph_executor.h"
#include "deep500/net/implementation_pins.h"
#include "deep500/spi/native_layout.h"
#include "deep500/op/operator.h"

namespace d5 {

struct OperatorExecutorOptions {
  // Free intermediates after their last use. Off keeps every tensor until the call returns (for
  // measuring what lifetime planning saves, and for debugging with fetchable intermediates).
  bool free_dead_tensors = true;
  // Measure the process peak RSS over each call (memory().peak_rss_bytes): resets the kernel's
  // high-water mark first and reads it after, two /proc accesses that cost tens of microseconds,
  // which would count as executor time in every timing. Off by default.
  bool measure_rss = false;
  // Scratch memory each operator may use per call (OpSpec::workspace_limit): implementations that
  // need more refuse, and a leaner one runs. -1: each implementation's own policy.
  int64_t workspace_limit = -1;
  // Op type -> the implementation that must run it (implementation_pins.h).
  ImplementationPins pins = {};
  // Inference keeps a tensor in the layout its producer's backend chose while every consumer is an
  // operator of that backend that takes it (native_layout.h): reorders happen only where a
  // tensor leaves them. Off: every operator exchanges plain row-major tensors. Training steps
  // always exchange plain tensors.
  bool native_layouts = true;
  // A parameter whose readers all run on one device other than the host moves there at the first
  // call and stays: the network then holds it on that device, its gradient is summed and
  // published there, and an optimizer updates it there (optimizers.md#on-a-device). Steady-state
  // steps then copy only the feeds that arrive from the host and the outputs the caller reads.
  // Constants read only on such a device (running statistics, folded values) are copied there
  // once, when the plan is made.
  // Off: parameters and gradients live on the host and cross to the device every call.
  bool resident_parameters = false;
  // Graph outputs are returned where their producer left them (a device tensor when the node ran
  // on a device), not copied to the host. With feeds already on the device (feed_devices()) and
  // resident parameters, a steady-state call then copies nothing between host and device.
  bool outputs_on_device = false;
};

// Where the tensors one node exchanges in a plan live, per input and output ("" where absent):
// the layout, "plain" or a backend's own ("onednn:aBcd16b"), after the device when that is not
// the host ("cuda:0/plain"); the device the node runs on; the inputs that arrive from another
// device (one copy each per call); the activation reorders one forward call of it runs.
struct NodeLayouts {
  std::string node;
  std::string device;
  std::vector<std::string> inputs, outputs;
  int transfers = 0;
  LayoutReorders reorders;
};

// The operator-executor options a registered executor factory receives as ExecutorOptions.
OperatorExecutorOptions operator_executor_options(const ExecutorOptions& options);

class OperatorExecutor : public GraphExecutor {
 public:
  // `name` is what backend() reports ("reference", "onednn"); `backends` the preference order
  // operators are created from. Inference and operator creation happen here, so a network that
  // is wrong or that no backend can run fails at construction, naming the node.
  OperatorExecutor(Network& network, std::string name, std::vector<std::string> backends,
                   OperatorExecutorOptions options = {});
  ~OperatorExecutor() override;

  std::string backend() const override { return name_; }
  const std::vector<std::string>& backends() const { return backends_; }
  const OperatorExecutorOptions& options() const { return options_; }
  void set_options(const OperatorExecutorOptions& options) { options_ = options; }

  TensorMap inference(const TensorMap& feeds) override;
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override;

  // Node -> operator implementation; folded nodes say "folded (computed at inference)", and a
  // node that runs on a later backend than the first says "IMPL (fallback: REASONS)".
  std::map<std::string, std::string> implementations() const override;
  // (node, why the preferred backends refused) for every node not run by the first backend.
  std::vector<std::pair<std::string, std::string>> fallbacks() const override;
  ExecutorMemory memory() const override { return memory_; }

  // Re-infers and re-creates operators when the network changed since the last call (it is
  // also done by inference calls, lazily). Parameter value changes need no preparation.
  void prepare();
  // The operator that runs `node` (its workspace, work counts, implementation); nullptr for
  // folded nodes and names that are not nodes.
  const Operator* operator_of(const std::string& node) const;
  // Per node that runs, in order: the layouts the plan for `loss` ("" = inference) exchanges
  // and the reorders each forward call runs. Makes the plan if there is none yet.
  std::vector<NodeLayouts> layouts(const std::string& loss = "");
  // Per graph input the plan for `loss` reads: the device its readers run on when they all run on
  // one, else the host. A caller that places a feed there saves the executor a copy per call.
  std::map<std::string, Device> feed_devices(const std::string& loss = "") override;
  // Sets OperatorExecutorOptions::outputs_on_device.
  bool keep_outputs_on_device() override {
    options_.outputs_on_device = true;
    return true;
  }
  // A fresh operator like the one the plan for `loss` runs for `node`: the same backend and pins,
  // and the same layout variant (for running the operators alone, as FrameworkOverhead does).
  std::unique_ptr<Operator> create_operator_like(const std::string& node, const std::string& loss = "");

 private:
  struct Plan;
  struct NodeState;
  const Plan& plan_for(const std::string& loss);
  Plan build_plan(const std::string& loss) const;
  std::vector<const Node*> nodes_needed(const std::string& loss) const;
  void plan_backward(Plan& p) const;
  void plan_layouts(Plan& p) const;
  void place_resident_values(Plan& p) const;
  TensorMap run(const TensorMap& feeds, const std::string& loss);
  struct Call;
  bool forward_pass(Call& c);  // false when an event asked to stop
  bool backward_pass(Call& c);
  bool backward_step(Call& c, size_t step);
  TensorMap publish_gradients(Call& c);

  std::string name_;
  std::vector<std::string> backends_;
  OperatorExecutorOptions options_;
  uint64_t version_ = 0;
  bool prepared_ = false;
  std::map<std::string, NodeState> nodes_;              // by node name; non-folded nodes only
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // by loss ("" = inference)
  ExecutorMemory memory_;
};

// The executor of the reference backend (registered as executor "reference"). The oneDNN
// backend registers "onednn", an OperatorExecutor on {"onednn", "reference"}; create it with
// make_executor(network, "onednn").
class ReferenceExecutor : public OperatorExecutor {
 public:
  explicit ReferenceExecutor(Network& network, OperatorExecutorOptions options = {})
      : OperatorExecutor(network, "reference", {"reference"}, options) {}
};

}  // namespace d5
