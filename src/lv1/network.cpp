#include "deep500/net/network.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"

namespace d5 {

namespace {

// Ops whose results differ between runs (random draws), so they are never folded.
bool is_random(const std::string& op_type) {
  static const std::set<std::string> random = {"Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike",
                                               "RandomUniformLike", "Multinomial", "Bernoulli"};
  return random.count(op_type) != 0;
}

std::string node_label(const Node& n) { return fmt::format("node '{}' ({})", n.name, n.op_type); }

}  // namespace

Network::Network(std::string name, int opset) : name_(std::move(name)), opset_(opset) { set_opset(opset); }

void Network::set_opset(int opset) {
  D5_CHECK_ARG(opset >= 1, "network '{}': opset must be positive, got {}", name_, opset);
  opset_ = opset;
  invalidate();
}

// ---------------------------------------------------------------- inputs and outputs

void Network::add_input(const std::string& name, const TensorDesc& desc) {
  D5_CHECK_ARG(!name.empty(), "network '{}': a graph input needs a name", name_);
  D5_CHECK_ARG(!input_descs_.count(name) && !initializers_.count(name) && !producer(name),
               "network '{}': tensor '{}' already exists; graph input names must be new", name_, name);
  inputs_.push_back(name);
  input_descs_[name] = desc;
  invalidate();
}

void Network::add_output(const std::string& name) {
  D5_CHECK_ARG(!name.empty(), "network '{}': a graph output needs a name", name_);
  if (std::find(outputs_.begin(), outputs_.end(), name) == outputs_.end()) outputs_.push_back(name);
  invalidate();
}

void Network::remove_output(const std::string& name) {
  auto it = std::find(outputs_.begin(), outputs_.end(), name);
  D5_CHECK_ARG(it != outputs_.end(), "network '{}': '{}' is not a graph output", name_, name);
  outputs_.erase(it);
  invalidate();
}

// ---------------------------------------------------------------- values

void Network::release_value(const std::string& name) {
  D5_CHECK_ARG(!initializers_.count(name),
               "network '{}': '{}' is an initializer; its value cannot be released (remove_initializer removes it)",
               name_, name);
  values_.erase(name);
}

void Network::feed_tensor(const std::string& name, Tensor value, bool is_param) {
  D5_CHECK_ARG(!name.empty(), "network '{}': feed_tensor needs a tensor name", name_);
  D5_CHECK_ARG(value.defined(), "network '{}': feed_tensor('{}') was given an empty tensor", name_, name);
  auto init = initializers_.find(name);
  if (init != initializers_.end()) {
    const Tensor& old = values_.at(name);
    D5_CHECK_ARG(old.dtype() == value.dtype() && old.shape() == value.shape(),
                 "network '{}': initializer '{}' is {}; it cannot be replaced by a {} tensor", name_, name,
                 old.desc().to_string(), value.desc().to_string());
    if (is_param) init->second = true;
    values_[name] = std::move(value);
    // A constant's value may decide shapes and folded results.
    if (!init->second) invalidate();
    return;
  }
  const bool known_tensor = input_descs_.count(name) || producer(name);
  if (!known_tensor && !name.ends_with("@grad")) {
    // A new initializer.
    initializers_[name] = is_param;
    values_[name] = std::move(value);
    invalidate();
    return;
  }
  values_[name] = std::move(value);
}

Tensor Network::fetch_tensor(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto k = known_.find(name);
  if (inferred_ && k != known_.end()) return k->second;
  throw InvalidArgument(fmt::format(
      "network '{}': tensor '{}' has no value (values are stored for initializers, and for graph "
      "outputs and gradients once an executor has run)",
      name_, name));
}

std::vector<Tensor> Network::fetch_tensors(const std::vector<std::string>& names) const {
  std::vector<Tensor> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(fetch_tensor(n));
  return out;
}

bool Network::is_param(const std::string& name) const {
  auto it = initializers_.find(name);
  return it != initializers_.end() && it->second;
}

void Network::set_param(const std::string& name, bool param) {
  auto it = initializers_.find(name);
  D5_CHECK_ARG(it != initializers_.end(), "network '{}': '{}' is not an initializer", name_, name);
  if (it->second != param) invalidate();
  it->second = param;
}

void Network::remove_initializer(const std::string& name) {
  D5_CHECK_ARG(initializers_.erase(name) == 1, "network '{}': '{}' is not an initializer", name_, name);
  values_.erase(name);
  values_.erase(gradient_name(name));
  invalidate();
}

std::vector<std::string> Network::get_params() const {
  std::vector<std::string> out;
  for (const auto& [n, p] : initializers_)
    if (p) out.push_back(n);
  return out;
}

std::vector<std::string> Network::initializers() const {
  std::vector<std::string> out;
  for (const auto& [n, p] : initializers_) out.push_back(n);
  return out;
}

std::vector<std::pair<std::string, std::string>> Network::gradient() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : get_params()) out.emplace_back(p, gradient_name(p));
  return out;
}

int64_t Network::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : get_params()) n += values_.at(p).numel();
  return n;
}

// ---------------------------------------------------------------- nodes

void Network::reindex() {
  node_index_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) node_index_[nodes_[i].name] = i;
}

Node& Network::add_node(Node node) {
  D5_CHECK_ARG(!node.op_type.empty(), "network '{}': a node needs an op type", name_);
  if (node.name.empty()) {
    for (size_t k = nodes_.size();; ++k) {
      node.name = fmt::format("{}_{}", node.op_type, k);
      if (!node_index_.count(node.name)) break;
    }
  }
  D5_CHECK_ARG(!node_index_.count(node.name), "network '{}': a node named '{}' already exists", name_, node.name);
  for (const auto& out : node.outputs) {
    if (out.empty()) continue;
    const Node* p = producer(out);
    D5_CHECK_ARG(!p, "network '{}': {} writes '{}', which {} already produces", name_, node_label(node), out,
                 p ? node_label(*p) : "");
    D5_CHECK_ARG(!input_descs_.count(out) && !initializers_.count(out),
                 "network '{}': {} writes '{}', which is a graph input or an initializer", name_,
                 node_label(node), out);
  }
  nodes_.push_back(std::move(node));
  node_index_[nodes_.back().name] = nodes_.size() - 1;
  invalidate();
  return nodes_.back();
}

void Network::remove_node(const std::string& name) {
  auto it = node_index_.find(name);
  D5_CHECK_ARG(it != node_index_.end(), "network '{}': no node named '{}'", name_, name);
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(it->second));
  reindex();
  invalidate();
}

const Node& Network::node(const std::string& name) const {
  auto it = node_index_.find(name);
  D5_CHECK_ARG(it != node_index_.end(), "network '{}': no node named '{}'", name_, name);
  return nodes_[it->second];
}

Node& Network::find_node(const std::string& name) {
  auto it = node_index_.find(name);
  D5_CHECK_ARG(it != node_index_.end(), "network '{}': no node named '{}'", name_, name);
  return nodes_[it->second];
}

Node& Network::mutable_node(const std::string& name) {
  invalidate();
  return find_node(name);
}

void Network::rewire(const std::string& node_name, size_t input_index, const std::string& tensor) {
  Node& n = find_node(node_name);
  D5_CHECK_ARG(input_index < n.inputs.size() + 1, "network '{}': {} has {} inputs; cannot rewire input {}", name_,
               node_label(n), n.inputs.size(), input_index);
  if (input_index == n.inputs.size()) n.inputs.push_back(tensor);
  else n.inputs[input_index] = tensor;
  invalidate();
}

void Network::replace_uses(const std::string& from, const std::string& to) {
  for (auto& n : nodes_)
    for (auto& in : n.inputs)
      if (in == from) in = to;
  for (auto& o : outputs_)
    if (o == from) o = to;
  invalidate();
}

const Node* Network::producer(const std::string& tensor) const {
  if (tensor.empty()) return nullptr;
  for (const auto& n : nodes_)
    if (std::find(n.outputs.begin(), n.outputs.end(), tensor) != n.outputs.end()) return &n;
  return nullptr;
}

std::vector<const Node*> Network::consumers(const std::string& tensor) const {
  std::vector<const Node*> out;
  for (const auto& n : nodes_)
    if (std::find(n.inputs.begin(), n.inputs.end(), tensor) != n.inputs.end()) out.push_back(&n);
  return out;
}

std::vector<const Node*> Network::input_nodes() const {
  std::vector<const Node*> out;
  for (const auto& n : nodes_)
    if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& t) { return input_descs_.count(t); }))
      out.push_back(&n);
  return out;
}

std::vector<const Node*> Network::output_nodes() const {
  std::vector<const Node*> out;
  for (const auto& n : nodes_)
    if (std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& t) {
          return !t.empty() && std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end();
        }))
      out.push_back(&n);
  return out;
}

std::string Network::unique_name(const std::string& prefix) const {
  auto taken = [&](const std::string& n) {
    if (input_descs_.count(n) || initializers_.count(n) || values_.count(n) || node_index_.count(n)) return true;
    return producer(n) != nullptr || !consumers(n).empty();
  };
  if (!taken(prefix)) return prefix;
  for (int k = 1;; ++k) {
    auto n = fmt::format("{}_{}", prefix, k);
    if (!taken(n)) return n;
  }
}

// ---------------------------------------------------------------- analysis

std::vector<const Node*> Network::topological_order() const {
  std::map<std::string, size_t> producer_of;
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const auto& o : nodes_[i].outputs)
      if (!o.empty()) producer_of[o] = i;
  // Kahn's algorithm, always taking the earliest-inserted ready node so the order is stable.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const auto& in : nodes_[i].inputs) {
      auto p = producer_of.find(in);
      if (p == producer_of.end()) continue;
      ++pending[i];
      users[p->second].push_back(i);
    }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<const Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(&nodes_[i]);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.insert(u);
  }
  if (order.size() == nodes_.size()) return order;
  // Walk producers from an unplaced node until a node repeats: that node is on a cycle.
  size_t at = 0;
  while (pending[at] == 0) ++at;
  std::vector<bool> seen(nodes_.size(), false);
  while (!seen[at]) {
    seen[at] = true;
    for (const auto& in : nodes_[at].inputs) {
      auto p = producer_of.find(in);
      if (p != producer_of.end() && pending[p->second] > 0) {
        at = p->second;
        break;
      }
    }
  }
  throw FormatError(fmt::format("network '{}': {} is on a cycle; a network must be acyclic", name_,
                                node_label(nodes_[at])));
}

void Network::infer() const {
  if (inferred_) return;
  descs_.clear();
  specs_.clear();
  known_.clear();
  folded_.clear();
  grad_masks_.clear();
  for (const auto& [n, d] : input_descs_) descs_[n] = d;
  for (const auto& [n, p] : initializers_) {
    descs_[n] = values_.at(n).desc();
    if (!p) known_[n] = values_.at(n);
  }
  for (const Node* node : topological_order()) {
    OpSpec spec;
    spec.type = node->op_type;
    spec.name = node->name;
    spec.attrs = node->attrs;
    spec.opset = opset_;
    spec.num_outputs = static_cast<int>(node->outputs.size());
    size_t n_in = node->inputs.size();
    while (n_in > 0 && node->inputs[n_in - 1].empty()) --n_in;
    bool all_known = true;
    for (size_t i = 0; i < n_in; ++i) {
      const std::string& t = node->inputs[i];
      if (t.empty()) {
        spec.inputs.emplace_back();
        spec.input_values.emplace_back();
        spec.present.push_back(false);
        continue;
      }
      auto d = descs_.find(t);
      D5_CHECK(d != descs_.end(), FormatError,
               "network '{}': {} reads '{}', which is neither a graph input, an initializer nor the output of a "
               "node",
               name_, node_label(*node), t);
      spec.inputs.push_back(d->second);
      auto k = known_.find(t);
      spec.input_values.emplace_back(k != known_.end() ? std::optional<Tensor>(k->second) : std::nullopt);
      all_known = all_known && k != known_.end();
      spec.present.push_back(true);
    }
    std::unique_ptr<Operator> op;
    try {
      op = OpRegistry::global().create(spec, "reference");
    } catch (const Error& e) {
      // Rethrow with the network's name: the op's own message already names the node.
      rethrow_with_message(e, fmt::format("network '{}': {}", name_, e.what()));
    }
    grad_masks_[node->name] = op->differentiable_inputs();
    const auto& out_descs = op->output_descs();
    D5_CHECK(node->outputs.size() <= out_descs.size(), InvalidArgument,
             "network '{}': {} lists {} outputs, but {} has {}", name_, node_label(*node), node->outputs.size(),
             node->op_type, out_descs.size());
    for (size_t j = 0; j < node->outputs.size(); ++j)
      if (!node->outputs[j].empty()) descs_[node->outputs[j]] = out_descs[j];

    // Shape reads only its input's descriptor, so it folds even when the input is computed.
    const bool foldable = node->op_type == "Shape" || (all_known && !is_random(node->op_type));
    if (foldable) {
      std::vector<Tensor> in;
      alignas(64) static const unsigned char never_read[64] = {};
      for (size_t i = 0; i < spec.inputs.size(); ++i) {
        if (!spec.has_input(i)) in.emplace_back();
        else if (spec.input_values[i]) in.push_back(*spec.input_values[i]);
        else in.push_back(Tensor::view(spec.inputs[i], const_cast<unsigned char*>(never_read)));
      }
      auto outs = op->run_forward(in);
      for (size_t j = 0; j < node->outputs.size(); ++j)
        if (!node->outputs[j].empty()) known_[node->outputs[j]] = outs[j];
      folded_[node->name] = true;
    }
    specs_[node->name] = std::move(spec);
  }
  for (const auto& o : outputs_)
    D5_CHECK(descs_.count(o), FormatError,
             "network '{}': graph output '{}' is neither a graph input, an initializer nor the output of a node",
             name_, o);
  inferred_ = true;
}

const TensorDesc& Network::desc(const std::string& tensor) const {
  infer();
  auto it = descs_.find(tensor);
  D5_CHECK_ARG(it != descs_.end(), "network '{}': no tensor named '{}'", name_, tensor);
  return it->second;
}

const OpSpec& Network::spec(const std::string& node_name) const {
  infer();
  auto it = specs_.find(node_name);
  D5_CHECK_ARG(it != specs_.end(), "network '{}': no node named '{}'", name_, node_name);
  return it->second;
}

const Tensor* Network::known_value(const std::string& tensor) const {
  infer();
  auto it = known_.find(tensor);
  return it == known_.end() ? nullptr : &it->second;
}

bool Network::is_folded(const std::string& node_name) const {
  infer();
  return folded_.count(node_name) != 0;
}

const std::vector<bool>& Network::differentiable_inputs(const std::string& node_name) const {
  infer();
  auto it = grad_masks_.find(node_name);
  D5_CHECK_ARG(it != grad_masks_.end(), "network '{}': no node named '{}'", name_, node_name);
  return it->second;
}

int Network::mark_parameters_by_use() {
  // Everything floating-point counts as a parameter first, so inference folds through none of them.
  for (auto& [n, p] : initializers_) p = is_floating(values_.at(n).dtype());
  invalidate();
  infer();
  std::set<std::string> trained;
  for (const auto& n : nodes_) {
    const auto& mask = grad_masks_.at(n.name);
    for (size_t i = 0; i < n.inputs.size() && i < mask.size(); ++i)
      if (mask[i]) trained.insert(n.inputs[i]);
  }
  int count = 0;
  for (auto& [n, p] : initializers_) {
    p = p && trained.count(n);
    count += p;
  }
  invalidate();
  return count;
}

int Network::fold_constants() {
  infer();
  std::vector<std::string> folded;
  for (const auto& n : nodes_)
    if (folded_.count(n.name)) folded.push_back(n.name);
  const auto known = known_;
  // A folded node's consumed outputs become constant initializers.
  for (const auto& name : folded) {
    const Node& n = node(name);
    for (const auto& o : n.outputs)
      if (!o.empty() && (!consumers(o).empty() || std::find(outputs_.begin(), outputs_.end(), o) != outputs_.end())) {
        initializers_[o] = false;
        values_[o] = known.at(o);
      }
  }
  for (const auto& name : folded) remove_node(name);
  invalidate();
  return static_cast<int>(folded.size()) + remove_dead_nodes();
}

int Network::remove_dead_nodes() {
  std::set<std::string> live(outputs_.begin(), outputs_.end());
  std::vector<std::string> dead;
  auto order = topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = **it;
    const bool used = std::any_of(n.outputs.begin(), n.outputs.end(),
                                  [&](const std::string& o) { return !o.empty() && live.count(o); });
    if (!used) {
      dead.push_back(n.name);
      continue;
    }
    for (const auto& in : n.inputs) live.insert(in);
  }
  for (const auto& name : dead) remove_node(name);
  // Constants nothing reads any more go too (parameters stay: the user may still want them).
  std::vector<std::string> unused;
  for (const auto& [n, p] : initializers_)
    if (!p && !live.count(n)) unused.push_back(n);
  for (const auto& n : unused) remove_initializer(n);
  return static_cast<int>(dead.size());
}

std::string Network::summary() const {
  return fmt::format("network '{}': {} nodes, {} inputs, {} outputs, {} parameters ({} values)", name_,
                     nodes_.size(), inputs_.size(), outputs_.size(), get_params().size(), parameter_count());
}

}  // namespace d5
