#pragma once
// Level 1: a network is a graph of ONNX-style nodes over named tensors, independent of file
// formats and backends (docs/network.md).
//
// Tensors are named. A name is a graph input (fed at each execution), an initializer (a value
// stored in the network: a trainable parameter or a constant), or the output of exactly one
// node. The network also stores the latest value of any tensor an executor wrote back (graph
// outputs, parameter gradients), so fetch_tensor serves parameters and results alike.
//
// Shapes are static: graph inputs carry full descriptors (a batch size is chosen when a model is
// loaded). infer() derives every other descriptor by creating each node's reference operator,
// which is the oracle for ONNX shape rules, and it folds what is computable before execution:
// Constant nodes, Shape of any tensor (its shape is known), and nodes whose inputs are all known
// constants (the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains PyTorch exports).
// Parameters are never folded through, since training changes them.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deep500/op/attributes.h"
#include "deep500/op/operator.h"
#include "deep500/core/tensor.h"

namespace d5 {

struct Node {
  std::string name;     // unique in the network; add_node generates one when empty
  std::string op_type;  // ONNX op type ("Conv"), or a custom operator's registered name
  std::string domain;   // "" (= "ai.onnx") for the default operator set
  Attributes attrs;
  std::vector<std::string> inputs;   // "" marks an absent optional input
  std::vector<std::string> outputs;  // "" marks an output the node does not ask for
};

class Network {
 public:
  explicit Network(std::string name = "network", int opset = 17);

  const std::string& name() const { return name_; }
  int opset() const { return opset_; }
  void set_opset(int opset);

  // --- graph inputs and outputs ---
  void add_input(const std::string& name, const TensorDesc& desc);
  const std::vector<std::string>& inputs() const { return inputs_; }
  // Marks an existing tensor (any intermediate too) as a graph output; no-op if it already is.
  void add_output(const std::string& name);
  void remove_output(const std::string& name);
  const std::vector<std::string>& outputs() const { return outputs_; }

  // --- values ---
  // Stores `value` under `name`. A new name becomes an initializer (a parameter when is_param,
  // else a constant). For an existing initializer, the value must keep its descriptor and replaces
  // the stored one; is_param then also sets the parameter flag. For any other tensor (a graph
  // input, an intermediate, a gradient) it stores the latest value, as executors do.
  void feed_tensor(const std::string& name, Tensor value, bool is_param = false);
  // The stored value; InvalidArgument naming the tensor when there is none.
  Tensor fetch_tensor(const std::string& name) const;
  std::vector<Tensor> fetch_tensors(const std::vector<std::string>& names) const;
  bool has_value(const std::string& name) const { return values_.count(name) != 0; }
  // Forgets the stored value of a tensor that is not an initializer (a gradient, an input, an
  // intermediate); nothing happens when there is none. An executor drops the last step's
  // gradients before computing new ones, so that their memory can be reused within the step.
  // InvalidArgument for an initializer (remove_initializer removes those).
  void release_value(const std::string& name);
  bool is_initializer(const std::string& name) const { return initializers_.count(name) != 0; }
  bool is_param(const std::string& name) const;
  void set_param(const std::string& name, bool is_param);
  void remove_initializer(const std::string& name);
  // Initializer names, sorted; params only or all.
  std::vector<std::string> get_params() const;
  std::vector<std::string> initializers() const;
  // (parameter, gradient tensor name) for every parameter; executors store gradients there.
  std::vector<std::pair<std::string, std::string>> gradient() const;
  static std::string gradient_name(const std::string& param) { return param + "@grad"; }

  // --- nodes ---
  // Adds a node; InvalidArgument when the name is taken or an output already has a producer.
  // Returns the stored node (references stay valid until the next add/remove).
  Node& add_node(Node node);
  void remove_node(const std::string& name);
  bool has_node(const std::string& name) const { return node_index_.count(name) != 0; }
  const Node& node(const std::string& name) const;
  Node& mutable_node(const std::string& name);  // invalidates inference
  const std::vector<Node>& nodes() const { return nodes_; }  // in insertion order
  // Rewires one input edge of a node to another tensor.
  void rewire(const std::string& node, size_t input_index, const std::string& tensor);
  // Makes every consumer of `from` (and the graph outputs) read `to` instead.
  void replace_uses(const std::string& from, const std::string& to);
  const Node* producer(const std::string& tensor) const;  // nullptr for inputs and initializers
  std::vector<const Node*> consumers(const std::string& tensor) const;
  std::vector<const Node*> input_nodes() const;   // nodes that read a graph input
  std::vector<const Node*> output_nodes() const;  // nodes that produce a graph output
  // A tensor name not used in the network yet ("prefix", "prefix_1", ...).
  std::string unique_name(const std::string& prefix) const;

  // --- analysis ---
  // Nodes in an order where each node follows the producers of its inputs (stable: insertion
  // order among independent nodes). FormatError naming a node on the cycle when there is one.
  std::vector<const Node*> topological_order() const;
  // Structural checks and shape/dtype inference, in one pass over topological order. Errors name
  // the node: cycles, inputs that nothing produces, duplicate producers, outputs that do not
  // exist, graph inputs without descriptors, and any shape/dtype/attribute error the node's
  // reference operator reports (InvalidArgument, or Unimplemented for an unknown op type).
  // Results are cached until the network changes.
  void infer() const;
  bool inferred() const { return inferred_; }
  // Changes whenever the graph or a constant changes (whatever invalidates inference), and not
  // when parameters or stored results change: executors compare it to know when to re-plan.
  uint64_t version() const { return version_; }
  // After infer(): every tensor's descriptor; InvalidArgument for an unknown name.
  const TensorDesc& desc(const std::string& tensor) const;
  // After infer(): the OpSpec executors create the node's operator from (descriptors, known
  // input values, opset, requested outputs).
  const OpSpec& spec(const std::string& node) const;
  // After infer(): values known before execution (constants and folded results; not params,
  // not graph inputs); nullptr otherwise.
  const Tensor* known_value(const std::string& tensor) const;
  // After infer(): whether every output of the node is known before execution, so an executor
  // need not run it.
  bool is_folded(const std::string& node) const;

  // After infer(): which inputs of the node have a gradient (its reference operator's mask; empty
  // for ops without one).
  const std::vector<bool>& differentiable_inputs(const std::string& node) const;

  // Makes the parameters exactly the floating-point initializers that feed a differentiable input
  // of some node (weights and biases, not BatchNormalization's running statistics, shape tensors
  // or float constants such as a Pad value); the others become constants. Importers call it, as
  // formats like ONNX do not say which initializers are trainable. Returns the parameter count.
  int mark_parameters_by_use();

  // Replaces folded nodes by constant initializers holding their results and removes nodes
  // nothing depends on any more; returns how many nodes were removed.
  int fold_constants();
  // Removes nodes whose outputs reach no graph output; returns how many.
  int remove_dead_nodes();

  // Total number of parameter elements.
  int64_t parameter_count() const;
  // "network 'lenet': 12 nodes, 3 inputs, 1 output, 8 parameters (61,706 values)"
  std::string summary() const;

 private:
  void invalidate() {
    inferred_ = false;
    ++version_;
  }
  void reindex();
  Node& find_node(const std::string& name);

  std::string name_;
  int opset_;
  std::vector<std::string> inputs_;
  std::map<std::string, TensorDesc> input_descs_;
  std::vector<std::string> outputs_;
  std::vector<Node> nodes_;
  std::map<std::string, size_t> node_index_;
  std::map<std::string, Tensor> values_;
  std::map<std::string, bool> initializers_;  // name -> is_param

  uint64_t version_ = 0;
  // inference cache
  mutable bool inferred_ = false;
  mutable std::map<std::string, TensorDesc> descs_;
  mutable std::map<std::string, OpSpec> specs_;
  mutable std::map<std::string, Tensor> known_;
  mutable std::map<std::string, bool> folded_;
  mutable std::map<std::string, std::vector<bool>> grad_masks_;
};

}  // namespace d5
