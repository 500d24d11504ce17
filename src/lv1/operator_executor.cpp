// The operator executor: a plan per (network version, loss) of slots and steps, then a loop.
// Names are resolved once, when planning: a call touches only vectors indexed by slot, so what
// the executor adds to the operators' own time stays small (docs/executor-metrics.md measures it).
#include "deep500/net/operator_executor.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/metrics/memory.h"
#include "deep500/op/op_registry.h"
#include "deep500/spi/fused_update.h"
#include "deep500/spi/selective_backward.h"
#include "deep500/spi/sparse_output_gradients.h"

namespace d5 {

namespace {

enum class SlotKind { Feed, Param, Constant, Produced };

struct Slot {
  std::string name;
  SlotKind kind = SlotKind::Produced;
  TensorDesc desc;
};

struct Step {
  Node node;  // a copy: events receive it, and it outlives edits of the network
  Operator* op = nullptr;
  Device device;                // op->device(): where its inputs are brought and its outputs live
  std::vector<int> in, out;     // slot of each input / each op output; -1 when absent or unnamed
  std::vector<int> free_after;  // slots dead once this step's forward ran
  // Reverse mode.
  bool backward = false;                 // runs in a training step
  std::vector<bool> grad_wanted;         // per input: differentiable and depends on a parameter
  std::vector<bool> grad_given;          // per input: a gradient buffer goes to backward
  std::vector<int> free_after_backward;  // forward values no backward still to run reads
  // A layout variant (inference): what it was created with (NativeLayoutOperator::with_layouts).
  bool variant = false;
  std::vector<std::optional<BackendLayout>> in_layouts;
  std::vector<bool> keep;
};

// In place: acc += g (same descriptor).
void accumulate(Tensor& acc, const Tensor& g) {
  const int64_t n = acc.numel();
  if (acc.dtype() == DType::f32) {
    float* a = acc.data_as<float>();
    const float* b = g.data_as<float>();
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  } else if (acc.dtype() == DType::f64) {
    double* a = acc.data_as<double>();
    const double* b = g.data_as<double>();
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) acc.set(i, acc.get(i) + g.get(i));
  }
}

// acc += g on their device through its FusedUpdates (an f32 sum on one device that has them);
// false when the sum must be taken on the host.
bool add_on_device(Tensor& acc, const Tensor& g) {
  if (acc.on_host() || !(acc.device() == g.device()) || acc.dtype() != DType::f32 || g.dtype() != DType::f32)
    return false;
  FusedUpdates* device = fused_updates_for(acc.device().kind);
  if (!device) return false;
  FusedUpdate u;
  u.kind = UpdateKind::accumulate;
  u.n = acc.numel();
  u.g = static_cast<const float*>(g.data());
  u.p = static_cast<float*>(acc.data());
  device->apply(acc.device().index, {&u, 1});
  return true;
}

std::string describe_refusals(const std::vector<Refusal>& refusals) {
  std::string s;
  for (const auto& r : refusals)
    s += fmt::format("{}{}: {}", s.empty() ? "" : "; ", r.implementation, r.reason);
  return s;
}

}  // namespace

namespace {
// Where a slot's value lives: (device, layout), the boundary at which the executor converts.
struct Placement {
  Device device;
  std::optional<BackendLayout> layout;
};
}  // namespace

struct OperatorExecutor::NodeState {
  std::unique_ptr<Operator> op;
  std::string backend;
  std::string fallback;  // empty when the first backend runs it
  std::vector<bool> grad_mask;
};

struct OperatorExecutor::Plan {
  std::string loss;  // "" for inference
  std::vector<Slot> slots;
  std::vector<Step> steps;  // forward order; only nodes a requested value depends on
  std::vector<std::pair<std::string, int>> feeds, params, outputs;
  std::vector<std::pair<int, Tensor>> constants;
  int loss_slot = -1;
  std::vector<bool> keep_to_end;  // per slot: returned (graph outputs, the loss)
  // Per slot, where its value lives: the device of the step producing it (the host for feeds,
  // parameters and constants) and, in inference, the backend layout it travels in (none: plain).
  // A reader on another device gets a copy; the operator variants that exchange native layouts
  // are what steps point at instead of the nodes' own.
  std::vector<Placement> placements;
  std::vector<std::unique_ptr<Operator>> variants;
  // The loss's upstream gradient (ones), made once on the device of the loss's producer: its
  // backward reads it and never writes it.
  mutable Tensor loss_seed;
};

OperatorExecutor::OperatorExecutor(Network& network, std::string name, std::vector<std::string> backends,
                                   OperatorExecutorOptions options)
    : GraphExecutor(network), name_(std::move(name)), backends_(std::move(backends)), options_(options) {
  D5_CHECK_ARG(!backends_.empty(), "executor '{}': needs at least one backend", name_);
  prepare();
}

OperatorExecutor::~OperatorExecutor() = default;

void OperatorExecutor::prepare() {
  const Network& net = network_;
  if (prepared_ && version_ == net.version()) return;
  net.infer();
  plans_.clear();
  nodes_.clear();
  prepared_ = false;
  for (const Node* node : net.topological_order()) {
    if (net.is_folded(node->name)) continue;
    NodeState s;
    OpSpec spec = net.spec(node->name);
    spec.workspace_limit = options_.workspace_limit;
    CreatedOperator created;
    try {
      created = create_operator(spec, backends_, options_.pins);
    } catch (const Error& e) {
      rethrow_with_message(e, fmt::format("network '{}', executor '{}': {}", net.name(), name_, e.what()));
    }
    s.op = std::move(created.op);
    s.backend = backends_[created.backend];
    if (created.backend > 0) s.fallback = describe_refusals(created.refusals);
    s.grad_mask = s.op->differentiable_inputs();
    nodes_.emplace(node->name, std::move(s));
  }
  version_ = net.version();
  prepared_ = true;
}

const Operator* OperatorExecutor::operator_of(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second.op.get();
}

std::map<std::string, std::string> OperatorExecutor::implementations() const {
  std::map<std::string, std::string> out;
  for (const auto& n : network_.nodes()) {
    auto it = nodes_.find(n.name);
    if (it == nodes_.end()) {
      out[n.name] = "folded (computed at inference)";
      continue;
    }
    const auto& s = it->second;
    out[n.name] = s.fallback.empty() ? s.op->implementation()
                                     : fmt::format("{} (fallback: {})", s.op->implementation(), s.fallback);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> OperatorExecutor::fallbacks() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : network_.nodes()) {
    auto it = nodes_.find(n.name);
    if (it != nodes_.end() && !it->second.fallback.empty()) out.emplace_back(n.name, it->second.fallback);
  }
  return out;
}

const OperatorExecutor::Plan& OperatorExecutor::plan_for(const std::string& loss) {
  prepare();
  auto it = plans_.find(loss);
  if (it == plans_.end()) it = plans_.emplace(loss, std::make_unique<Plan>(build_plan(loss))).first;
  return *it->second;
}

namespace {

// A loss is one floating-point value that a node computes (not a constant).
void check_loss(const Network& net, const std::string& loss) {
  const Node* producer = net.producer(loss);
  D5_CHECK_ARG(producer, "network '{}': loss '{}' is not computed by a node (it must be the output of one)",
               net.name(), loss);
  D5_CHECK_ARG(!net.is_folded(producer->name),
               "network '{}': loss '{}' is a constant (node '{}' is folded); it depends on no input or parameter",
               net.name(), loss, producer->name);
  const TensorDesc& d = net.desc(loss);
  D5_CHECK_ARG(d.numel() == 1 && is_floating(d.dtype),
               "network '{}': loss '{}' must be one floating-point value, but it is {}", net.name(), loss,
               d.to_string());
}

// Slots by name, each created on first use with its kind.
class SlotTable {
 public:
  SlotTable(const Network& net, std::vector<Slot>& slots) : net_(net), slots_(slots) {}
  int operator()(const std::string& name) {
    if (name.empty()) return -1;
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    Slot s;
    s.name = name;
    s.desc = net_.desc(name);
    const auto& inputs = net_.inputs();
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) s.kind = SlotKind::Feed;
    else if (net_.is_param(name)) s.kind = SlotKind::Param;
    else if (net_.known_value(name)) s.kind = SlotKind::Constant;
    else s.kind = SlotKind::Produced;
    const int id = static_cast<int>(slots_.size());
    slots_.push_back(std::move(s));
    ids_.emplace(name, id);
    return id;
  }

 private:
  const Network& net_;
  std::vector<Slot>& slots_;
  std::map<std::string, int> ids_;
};

// Lifetimes of produced slots: the last forward reader, or the earliest backward step that reads
// it as an input or an output (the last backward to run). Returned values live to the end.
void plan_lifetimes(std::vector<Step>& steps, const std::vector<Slot>& slots, const std::vector<bool>& keep_to_end) {
  const size_t n_slots = slots.size();
  std::vector<int> last_forward(n_slots, -1), first_backward(n_slots, -1);
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& st = steps[k];
    const int ik = static_cast<int>(k);
    for (int s : st.in)
      if (s >= 0) last_forward[s] = ik;
    for (int s : st.out)
      if (s >= 0) last_forward[s] = std::max(last_forward[s], ik);  // unread outputs die at once
    if (st.backward) {
      for (int s : st.in)
        if (s >= 0 && first_backward[s] < 0) first_backward[s] = ik;
      for (int s : st.out)
        if (s >= 0 && first_backward[s] < 0) first_backward[s] = ik;
    }
  }
  for (size_t s = 0; s < n_slots; ++s) {
    if (slots[s].kind != SlotKind::Produced || keep_to_end[s] || last_forward[s] < 0) continue;
    if (first_backward[s] >= 0) steps[first_backward[s]].free_after_backward.push_back(static_cast<int>(s));
    else steps[last_forward[s]].free_after.push_back(static_cast<int>(s));
  }
}

}  // namespace

// A parameter or constant whose readers all run on one device other than the host lives there
// (OperatorExecutorOptions::resident_parameters): a parameter from its first call on, a constant
// (a batch normalization's running statistics, a folded value) from the plan on, copied once.
void OperatorExecutor::place_resident_values(Plan& p) const {
  std::vector<std::optional<Device>> device(p.slots.size());
  std::vector<bool> mixed(p.slots.size(), false);
  for (const Step& st : p.steps)
    for (int s : st.in) {
      if (s < 0 || (p.slots[s].kind != SlotKind::Param && p.slots[s].kind != SlotKind::Constant)) continue;
      if (device[s] && !(*device[s] == st.device)) mixed[s] = true;
      device[s] = st.device;
    }
  auto home = [&](int id) -> std::optional<Device> {
    if (device[id] && !mixed[id] && !(*device[id] == Device::cpu())) return device[id];
    return std::nullopt;
  };
  for (const auto& [name, id] : p.params)
    if (auto d = home(id)) p.placements[id].device = *d;
  for (auto& [id, value] : p.constants)
    if (auto d = home(id)) {
      p.placements[id].device = *d;
      value = value.to(*d);
    }
}

OperatorExecutor::Plan OperatorExecutor::build_plan(const std::string& loss) const {
  const Network& net = network_;
  if (!loss.empty()) check_loss(net, loss);
  Plan p;
  p.loss = loss;
  SlotTable slot(net, p.slots);
  for (const Node* n : nodes_needed(loss)) {
    const NodeState& s = nodes_.at(n->name);
    Step st;
    st.node = *n;
    st.op = s.op.get();
    st.device = s.op->device();
    const size_t n_in = s.op->spec().inputs.size();
    for (size_t i = 0; i < n_in; ++i) st.in.push_back(i < n->inputs.size() ? slot(n->inputs[i]) : -1);
    for (size_t j = 0; j < s.op->output_descs().size(); ++j)
      st.out.push_back(j < n->outputs.size() ? slot(n->outputs[j]) : -1);
    p.steps.push_back(std::move(st));
  }
  for (const auto& o : net.outputs()) p.outputs.emplace_back(o, slot(o));
  if (!loss.empty()) {
    p.loss_slot = slot(loss);
    if (std::find(net.outputs().begin(), net.outputs().end(), loss) == net.outputs().end())
      p.outputs.emplace_back(loss, p.loss_slot);
  }
  for (size_t k = 0; k < p.slots.size(); ++k) {
    const Slot& s = p.slots[k];
    const int id = static_cast<int>(k);
    if (s.kind == SlotKind::Feed) p.feeds.emplace_back(s.name, id);
    if (s.kind == SlotKind::Param) p.params.emplace_back(s.name, id);
    if (s.kind == SlotKind::Constant) p.constants.emplace_back(id, *net.known_value(s.name));
  }
  p.keep_to_end.assign(p.slots.size(), false);
  for (const auto& [name, id] : p.outputs) p.keep_to_end[id] = true;
  p.placements.assign(p.slots.size(), Placement{});
  for (const Step& st : p.steps)
    for (int o : st.out)
      if (o >= 0) p.placements[o].device = st.device;
  if (options_.resident_parameters) place_resident_values(p);
  if (loss.empty() && options_.native_layouts) plan_layouts(p);
  if (!loss.empty()) plan_backward(p);
  plan_lifetimes(p.steps, p.slots, p.keep_to_end);
  return p;
}

// The nodes a requested value (graph output, loss) depends on, in topological order.
std::vector<const Node*> OperatorExecutor::nodes_needed(const std::string& loss) const {
  const Network& net = network_;
  std::set<std::string> needed(net.outputs().begin(), net.outputs().end());
  if (!loss.empty()) needed.insert(loss);
  std::vector<const Node*> order;
  const auto topo = net.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const Node& n = **it;
    if (!nodes_.count(n.name)) continue;  // folded: its outputs are constants
    if (std::none_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return needed.count(o); }))
      continue;
    for (const auto& in : n.inputs)
      if (!in.empty()) needed.insert(in);
    order.push_back(&n);
  }
  std::reverse(order.begin(), order.end());
  return order;
}

// Reverse mode: which slots depend on a parameter (forward), and which gradients reach the loss
// (backward, through differentiable inputs only).
void OperatorExecutor::plan_backward(Plan& p) const {
  const size_t n_slots = p.slots.size();
  std::vector<bool> from_param(n_slots, false);
  for (const auto& [name, id] : p.params) from_param[id] = true;
  for (auto& st : p.steps) {
    const auto& mask = nodes_.at(st.node.name).grad_mask;
    st.grad_wanted.assign(st.in.size(), false);
    bool any = false;
    for (size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0 && i < mask.size() && mask[i] && from_param[st.in[i]]) st.grad_wanted[i] = any = true;
    if (any)
      for (int o : st.out)
        if (o >= 0) from_param[o] = true;
  }
  std::vector<bool> reaches_loss(n_slots, false);
  reaches_loss[p.loss_slot] = true;
  for (auto it = p.steps.rbegin(); it != p.steps.rend(); ++it) {
    Step& st = *it;
    const bool out_reaches =
        std::any_of(st.out.begin(), st.out.end(), [&](int o) { return o >= 0 && reaches_loss[o]; });
    const bool wants = std::find(st.grad_wanted.begin(), st.grad_wanted.end(), true) != st.grad_wanted.end();
    st.backward = out_reaches && wants;
    if (!st.backward) continue;
    // Differentiable inputs no parameter depends on (graph inputs, constants) get no buffer
    // where the operator can skip them: their gradient would be computed for nothing.
    const auto& mask = nodes_.at(st.node.name).grad_mask;
    const bool skips = dynamic_cast<const SelectiveBackward*>(st.op) != nullptr;
    st.grad_given.assign(st.in.size(), false);
    for (size_t i = 0; i < st.in.size(); ++i)
      st.grad_given[i] = i < mask.size() && mask[i] && st.op->spec().has_input(i) && (!skips || st.grad_wanted[i]);
    for (size_t i = 0; i < st.in.size(); ++i)
      if (st.grad_wanted[i]) reaches_loss[st.in[i]] = true;
  }
}

// In forward order: a step whose operator exchanges backend layouts gets a variant reading its
// inputs in the layouts their producers left them in, and leaving an output in its own layout
// when every reader takes that layout (a graph output or the loss never: the caller reads them).
void OperatorExecutor::plan_layouts(Plan& p) const {
  std::vector<std::vector<std::pair<size_t, size_t>>> readers(p.slots.size());  // (step, input)
  for (size_t k = 0; k < p.steps.size(); ++k)
    for (size_t i = 0; i < p.steps[k].in.size(); ++i)
      if (p.steps[k].in[i] >= 0) readers[p.steps[k].in[i]].emplace_back(k, i);
  auto layout_op = [](const Operator* op) { return dynamic_cast<const NativeLayoutOperator*>(op); };
  for (Step& st : p.steps) {
    const NativeLayoutOperator* op = layout_op(st.op);
    if (!op) continue;
    std::vector<std::optional<BackendLayout>> in(st.in.size());
    bool native_in = false;
    for (size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0 && p.placements[st.in[i]].layout) {
        in[i] = p.placements[st.in[i]].layout;
        native_in = true;
      }
    // Which layouts the outputs would have: the operator's own for plain inputs, else a probe's.
    std::unique_ptr<Operator> probe;
    if (native_in) probe = op->with_layouts(in, std::vector<bool>(st.out.size(), true));
    const NativeLayoutOperator* candidate = probe ? layout_op(probe.get()) : op;
    std::vector<bool> keep(st.out.size(), false);
    bool any_kept = false;
    for (size_t j = 0; j < st.out.size(); ++j) {
      const int s = st.out[j];
      if (s < 0 || p.keep_to_end[s] || readers[s].empty() || !candidate) continue;
      const auto l = candidate->output_layout(j);
      keep[j] = l && std::all_of(readers[s].begin(), readers[s].end(), [&](const auto& r) {
                  const NativeLayoutOperator* reader = layout_op(p.steps[r.first].op);
                  return reader && reader->accepts_layout(r.second, *l);
                });
      any_kept = any_kept || keep[j];
    }
    if (!native_in && !any_kept) continue;
    std::unique_ptr<Operator> v = op->with_layouts(in, keep);
    if (const NativeLayoutOperator* vl = layout_op(v.get()))
      for (size_t j = 0; j < st.out.size(); ++j)
        if (keep[j]) p.placements[st.out[j]].layout = vl->output_layout(j);
    st.op = v.get();
    st.variant = true;
    st.in_layouts = std::move(in);
    st.keep = std::move(keep);
    p.variants.push_back(std::move(v));
  }
}

std::vector<NodeLayouts> OperatorExecutor::layouts(const std::string& loss) {
  const Plan& p = plan_for(loss);
  auto name = [&](int s) -> std::string {
    if (s < 0) return "";
    const auto& [device, l] = p.placements[s];
    const std::string layout = l ? l->backend + ":" + l->name : "plain";
    return device == Device::cpu() ? layout : device.to_string() + "/" + layout;
  };
  std::vector<NodeLayouts> out;
  for (const Step& st : p.steps) {
    NodeLayouts n;
    n.node = st.node.name;
    n.device = st.device.to_string();
    for (int s : st.in) {
      n.inputs.push_back(name(s));
      if (s >= 0 && !(p.placements[s].device == st.device)) ++n.transfers;
    }
    for (int s : st.out) n.outputs.push_back(name(s));
    if (const auto* op = dynamic_cast<const NativeLayoutOperator*>(st.op)) n.reorders = op->reorders();
    out.push_back(std::move(n));
  }
  return out;
}

std::unique_ptr<Operator> OperatorExecutor::create_operator_like(const std::string& node, const std::string& loss) {
  const Plan& p = plan_for(loss);
  auto st = std::find_if(p.steps.begin(), p.steps.end(), [&](const Step& s) { return s.node.name == node; });
  D5_CHECK_ARG(st != p.steps.end(), "network '{}': no node '{}' runs in the {} plan", network_.name(), node,
               loss.empty() ? "inference" : "training");
  const NodeState& s = nodes_.at(node);
  if (st->variant)
    return dynamic_cast<const NativeLayoutOperator&>(*s.op).with_layouts(st->in_layouts, st->keep);
  OpSpec spec = s.op->spec();
  return create_operator(spec, {s.backend}, options_.pins).op;
}

TensorMap OperatorExecutor::inference(const TensorMap& feeds) { return run(feeds, ""); }

std::map<std::string, Device> OperatorExecutor::feed_devices(const std::string& loss) {
  const Plan& p = plan_for(loss);
  std::map<std::string, Device> devices;
  for (const auto& [name, id] : p.feeds) {
    std::optional<Device> only;
    bool one = true;
    for (const Step& st : p.steps)
      if (std::find(st.in.begin(), st.in.end(), id) != st.in.end()) {
        if (only && !(*only == st.device)) one = false;
        only = st.device;
      }
    devices[name] = one && only ? *only : Device::cpu();
  }
  return devices;
}

TensorMap OperatorExecutor::inference_and_backprop(const TensorMap& feeds, const std::string& loss) {
  D5_CHECK_ARG(!loss.empty(), "network '{}': inference_and_backprop needs the name of the loss tensor",
               network_.name());
  return run(feeds, loss);
}

// One call's tensors: values by slot, the outputs of steps that run backward, gradients by slot,
// and the bytes of the tensors the call allocated (activations, gradients) alive at once.
struct OperatorExecutor::Call {
  const Plan& p;
  bool free;  // options_.free_dead_tensors
  std::vector<Tensor> env, grads;
  std::vector<std::vector<Tensor>> saved;  // full outputs, unnamed ones too: backward may read them
  std::vector<Tensor> moved;               // per slot: its value copied to another device's reader
  int64_t live = 0, peak = 0;
  int64_t transfers = 0, transfer_bytes = 0;

  Call(const Plan& plan, bool free_dead)
      : p(plan), free(free_dead), env(plan.slots.size()), saved(plan.steps.size()), moved(plan.slots.size()) {}
  void hold(int64_t bytes) { peak = std::max(peak, live += bytes); }
  void release(Tensor& t) {
    if (!t.defined()) return;
    live -= static_cast<int64_t>(t.bytes());
    t = Tensor();
  }
  void release_slot(int s) {
    release(env[s]);
    release(moved[s]);
  }
  // t on `device`, copied (and counted) when it lives elsewhere.
  Tensor to(const Tensor& t, Device device) {
    if (!t.defined() || t.device() == device) return t;
    ++transfers;
    transfer_bytes += static_cast<int64_t>(t.bytes());
    return t.to(device);
  }
  // Slot s's value on `device`: a reader on another device gets a copy, made once per producer
  // value and device (the next reader on that device shares it).
  const Tensor& value_on(int s, Device device) {
    if (env[s].device() == device) return env[s];
    if (!moved[s].defined() || !(moved[s].device() == device)) {
      if (moved[s].defined()) release(moved[s]);
      moved[s] = to(env[s], device);
      hold(static_cast<int64_t>(moved[s].bytes()));
    }
    return moved[s];
  }
  void inputs_of(const Step& st, std::vector<Tensor>& ins) {
    ins.assign(st.in.size(), Tensor());
    for (size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0 && env[st.in[i]].defined()) ins[i] = value_on(st.in[i], st.device);
  }
};

TensorMap OperatorExecutor::run(const TensorMap& feeds, const std::string& loss) {
  const Plan& p = plan_for(loss);
  check_feeds(feeds);
  Network& net = network_;
  const bool rss = options_.measure_rss && reset_peak_rss();
  Call c(p, options_.free_dead_tensors);
  for (const auto& [name, id] : p.feeds) c.env[id] = feeds.at(name);
  for (const auto& [name, id] : p.params) {
    c.env[id] = net.fetch_tensor(name);
    // A resident parameter moves once; the network holds it where its readers run from now on.
    const Device home = p.placements[id].device;
    if (options_.resident_parameters && !(c.env[id].device() == home)) {
      c.env[id] = c.to(c.env[id], home);
      net.feed_tensor(name, c.env[id]);
    }
  }
  for (const auto& [id, value] : p.constants) c.env[id] = value;

  fire_before_executor(feeds);
  bool completed = forward_pass(c);
  TensorMap result;  // the caller reads it: on the host unless asked otherwise
  for (const auto& [name, id] : p.outputs)
    if (c.env[id].defined())
      result[name] = options_.outputs_on_device ? c.env[id] : c.value_on(id, Device::cpu());
  if (completed) fire_after_inference(result);
  if (completed && !loss.empty() && backward_pass(c)) fire_after_backprop(publish_gradients(c));

  for (const auto& [name, value] : result)
    if (!net.is_initializer(name)) net.feed_tensor(name, value);
  memory_.peak_tensor_bytes = c.peak;
  memory_.transfers = c.transfers;
  memory_.transfer_bytes = c.transfer_bytes;
  memory_.peak_rss_bytes = rss ? peak_rss_bytes() : -1;
  fire_after_executor(result);
  return result;
}

bool OperatorExecutor::forward_pass(Call& c) {
  std::vector<Tensor> ins, outs;
  for (size_t k = 0; k < c.p.steps.size(); ++k) {
    const Step& st = c.p.steps[k];
    c.inputs_of(st, ins);
    if (!fire_before_operator(st.node, Pass::forward, ins)) return false;
    outs = st.op->run_forward(ins);
    int64_t unnamed = 0;
    for (size_t j = 0; j < outs.size(); ++j) {
      c.hold(static_cast<int64_t>(outs[j].bytes()));
      if (st.out[j] >= 0) c.env[st.out[j]] = outs[j];
      else unnamed += static_cast<int64_t>(outs[j].bytes());
    }
    const bool go_on = fire_after_operator(st.node, Pass::forward, outs);
    if (st.backward) c.saved[k] = outs;
    else c.live -= unnamed;
    outs.clear();
    if (c.free)
      for (int s : st.free_after) c.release_slot(s);
    if (!go_on) return false;
  }
  return true;
}

bool OperatorExecutor::backward_pass(Call& c) {
  const Plan& p = c.p;
  c.grads.assign(p.slots.size(), Tensor());
  const Device loss_device = p.placements[p.loss_slot].device;
  if (!p.loss_seed.defined() || !(p.loss_seed.device() == loss_device)) {
    Tensor ones(p.slots[p.loss_slot].desc);
    ones.fill(1.0);
    p.loss_seed = c.to(ones, loss_device);
  }
  c.grads[p.loss_slot] = p.loss_seed;
  c.hold(static_cast<int64_t>(c.grads[p.loss_slot].bytes()));
  for (size_t k = p.steps.size(); k-- > 0;) {
    const Step& st = p.steps[k];
    if (!st.backward) continue;
    if (!backward_step(c, k)) return false;
    // This node's output gradients are consumed: every consumer ran before it.
    if (c.free)
      for (int o : st.out)
        if (o >= 0 && o != p.loss_slot) c.release(c.grads[o]);
    for (size_t j = 0; j < c.saved[k].size(); ++j)
      if (st.out[j] < 0) c.live -= static_cast<int64_t>(c.saved[k][j].bytes());
    c.saved[k].clear();
    if (c.free)
      for (int s : st.free_after_backward) c.release_slot(s);
  }
  return true;
}

bool OperatorExecutor::backward_step(Call& c, size_t k) {
  const Step& st = c.p.steps[k];
  const auto& op_outs = c.saved[k];
  std::vector<Tensor> grad_outs(op_outs.size());
  bool any = false;
  for (size_t j = 0; j < op_outs.size(); ++j) {
    if (st.out[j] >= 0 && c.grads[st.out[j]].defined()) {
      grad_outs[j] = c.to(c.grads[st.out[j]], st.device);
      if (grad_outs[j].data() != c.grads[st.out[j]].data()) c.hold(static_cast<int64_t>(grad_outs[j].bytes()));
      any = true;
    }
  }
  if (!any) return true;
  // An output nothing differentiates gets an explicit zero gradient (floating outputs only),
  // unless the operator takes an undefined one as zero without reading it.
  const bool sparse = dynamic_cast<const SparseOutputGradients*>(st.op) != nullptr;
  for (size_t j = 0; j < op_outs.size(); ++j)
    if (!sparse && !grad_outs[j].defined() && is_floating(op_outs[j].dtype())) {
      grad_outs[j] = Tensor(op_outs[j].desc(), st.device);
      c.hold(static_cast<int64_t>(grad_outs[j].bytes()));
    }
  std::vector<Tensor> ins;
  c.inputs_of(st, ins);
  if (!fire_before_operator(st.node, Pass::backward, grad_outs)) return false;
  std::vector<Tensor> grad_ins(st.in.size());
  for (size_t i = 0; i < st.in.size(); ++i)
    if (st.grad_given[i]) grad_ins[i] = Tensor::uninitialized(st.op->spec().inputs[i], st.device);
  st.op->backward(grad_outs, ins, op_outs, grad_ins);
  for (const auto& g : grad_ins) c.hold(static_cast<int64_t>(g.bytes()));
  const bool go_on = fire_after_operator(st.node, Pass::backward, grad_ins);
  for (size_t i = 0; i < grad_ins.size(); ++i) {
    if (!grad_ins[i].defined()) continue;
    if (i < st.grad_wanted.size() && st.grad_wanted[i]) {
      Tensor& acc = c.grads[st.in[i]];
      if (!acc.defined()) {
        acc = grad_ins[i];
        continue;
      }
      if (add_on_device(acc, grad_ins[i])) {
        c.release(grad_ins[i]);
        continue;
      }
      // Elsewhere sums are taken on the host: the gradient comes back.
      if (!acc.on_host()) {
        Tensor host = c.to(acc, Device::cpu());
        c.release(acc);
        acc = host;
        c.hold(static_cast<int64_t>(acc.bytes()));
      }
      accumulate(acc, grad_ins[i].on_host() ? grad_ins[i] : c.to(grad_ins[i], Device::cpu()));
    }
    c.release(grad_ins[i]);
  }
  for (size_t j = 0; j < op_outs.size(); ++j)
    if (!(st.out[j] >= 0 && c.grads[st.out[j]].defined() && grad_outs[j].data() == c.grads[st.out[j]].data()))
      c.release(grad_outs[j]);
  return go_on;
}

// Every parameter's gradient into the network (zero for a parameter the loss does not depend on).
TensorMap OperatorExecutor::publish_gradients(Call& c) {
  Network& net = network_;
  std::map<std::string, int> param_slot(c.p.params.begin(), c.p.params.end());
  TensorMap gradients;
  for (const auto& [param, grad_name] : net.gradient()) {
    Tensor g;
    // A resident parameter's gradient stays beside it; the others go to the host.
    Device home = Device::cpu();
    if (auto it = param_slot.find(param); it != param_slot.end()) {
      g = c.grads[it->second];
      if (options_.resident_parameters) home = c.p.placements[it->second].device;
    }
    if (!g.defined()) g = Tensor(net.desc(param), home);
    g = c.to(g, home);
    net.feed_tensor(grad_name, g);
    gradients[grad_name] = g;
  }
  return gradients;
}

OperatorExecutorOptions operator_executor_options(const ExecutorOptions& options) {
  OperatorExecutorOptions o;
  o.workspace_limit = options.workspace_limit;
  o.pins = options.pins;
  o.native_layouts = options.native_layouts;
  return o;
}

}  // namespace d5
