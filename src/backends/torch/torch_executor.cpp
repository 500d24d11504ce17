#include "torch_executor.h"

#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "backward_events.h"
#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/metrics/memory.h"
#include "deep500/op/op_registry.h"
#include "custom_autograd.h"
#include "aten_math.h"
#include "torch_device.h"
#include "torch_op.h"

namespace d5::torch_backend {

// One node of the network, in execution order.
struct TorchExecutor::Step {
  const Node* node = nullptr;
  std::shared_ptr<Operator> op;
  TorchOp* torch = nullptr;           // op, when it is an ATen kernel of the torch backend
  // Otherwise what runs inside autograd (apply_custom_op): a custom operator the torch backend
  // wraps (AutogradOp's inner operator) or the reference operator of a refused node.
  std::shared_ptr<Operator> autograd_op;
  std::vector<int> in;                // slot of each spec input; -1 where absent
  std::vector<int> out;               // slot of each operator output; -1 where the node names none
  std::vector<at::ScalarType> out_type;
  std::vector<bool> wanted;           // outputs the node names (kernels may skip the others' work)
  std::vector<int> release;           // slots nothing reads after this step
};

// A value the steps read that no step computes: a parameter (re-bound to the network's buffer at
// each run) or a constant / folded value (bound when planned: changing one changes the network's
// version, which plans again).
struct TorchExecutor::Binding {
  std::string name;
  int slot = -1;
  bool param = false;
  bool trainable = false;  // a floating-point parameter: an autograd leaf in training
  Tensor held;             // the d5 tensor viewed (keeps its buffer alive while viewed)
  at::Tensor value;
  Tensor grad;             // accumulate sink: the gradient tensor autograd adds into, and its view
  at::Tensor grad_view;
};

namespace {

// An event asked to stop during backward; the autograd engine hands it back to the caller.
struct StopBackward : std::exception {
  const char* what() const noexcept override { return "stopped by an executor event"; }
};

// d5 views of ATen tensors for events, on the executor's device; non-contiguous ones (expanded
// gradients) are copied first and kept here while the views are in use.
struct EventViews {
  std::vector<at::Tensor> kept;
  std::vector<Tensor> views;
  EventViews(const std::vector<at::Tensor>& ts, const Device& device) {
    for (const auto& t : ts) {
      kept.push_back(t.defined() ? t.contiguous() : t);
      const at::Tensor& c = kept.back();
      views.push_back(t.defined() ? Tensor::view(TensorDesc{dtype_of(c.scalar_type()), Shape(c.sizes().vec()),
                                                            Layout::any},
                                                 c.data_ptr(), device)
                                  : Tensor());
    }
  }
};

// Puts at::Context's deterministic-algorithms flag as the options ask for the duration of a run.
class DeterminismScope {
 public:
  explicit DeterminismScope(bool deterministic) : before_(at::globalContext().deterministicAlgorithms()) {
    if (deterministic != before_) at::globalContext().setDeterministicAlgorithms(deterministic, false);
  }
  ~DeterminismScope() {
    if (at::globalContext().deterministicAlgorithms() != before_)
      at::globalContext().setDeterministicAlgorithms(before_, false);
  }
  DeterminismScope(const DeterminismScope&) = delete;
  DeterminismScope& operator=(const DeterminismScope&) = delete;

 private:
  bool before_;
};

}  // namespace

TorchExecutor::TorchExecutor(Network& network, const ExecutorOptions& options)
    : GraphExecutor(network), options_(options), placement_(torch_placement(options.device)) {
  set_aten_math(f32_math());
  // Its kernels come from the torch backend's operators, registered with the executor itself
  // (register_builtin_operators); a program that constructs it directly registers them first.
  plan();
}

TorchExecutor::~TorchExecutor() = default;

at::Tensor TorchExecutor::view_keeping(const Tensor& t) const {
  const auto options = at::TensorOptions().dtype(scalar_type(t.dtype())).device(placement_.aten);
  if (t.numel() == 0) return at::empty(dims_of(t.shape()), options);
  // The deleter holds a reference to the d5 buffer: autograd may keep the view past the run.
  return at::from_blob(const_cast<void*>(t.data()), dims_of(t.shape()), [keep = t](void*) {}, options);
}

Tensor TorchExecutor::owned(const at::Tensor& result, const TensorDesc& desc) const {
  return to_owned(result, desc, placement_.device, placement_.aten);
}

std::map<std::string, Device> TorchExecutor::feed_devices(const std::string& /*loss*/) {
  std::map<std::string, Device> out;
  if (!placement_.host())
    for (const auto& [name, slot] : input_slots_) out[name] = placement_.device;
  return out;
}

bool TorchExecutor::keep_outputs_on_device() {
  outputs_on_device_ = !placement_.host();
  return outputs_on_device_;
}

void TorchExecutor::count_transfer(size_t bytes) {
  ++memory_.transfers;
  memory_.transfer_bytes += static_cast<int64_t>(bytes);
}

Tensor TorchExecutor::on_device(const Tensor& t) {
  if (t.device() == placement_.device) return t;
  count_transfer(t.bytes());
  return t.to(placement_.device);
}

void TorchExecutor::plan() {
  Network& net = network_;
  net.infer();
  steps_.clear();
  bindings_.clear();
  slot_of_.clear();
  input_slots_.clear();
  fallbacks_.clear();
  auto slot = [&](const std::string& name) { return slot_of_.try_emplace(name, int(slot_of_.size())).first->second; };
  for (const auto& name : net.inputs()) input_slots_.emplace_back(name, slot(name));

  for (const Node* node : net.topological_order()) {
    if (net.is_folded(node->name)) continue;
    OpSpec spec = net.spec(node->name);
    spec.workspace_limit = options_.workspace_limit;
    Step s;
    s.node = node;
    std::vector<Refusal> refusals;
    s.op = OpRegistry::global().create_with_fallback(spec, {"torch", "reference"}, &refusals);
    s.torch = dynamic_cast<TorchOp*>(s.op.get());
    if (!s.torch) {
      const auto* wrapped = dynamic_cast<const AutogradOp*>(s.op.get());
      s.autograd_op = wrapped ? wrapped->inner() : s.op;
    }
    // Refusals mean the torch backend did not take the node: a fallback. An operator the torch
    // backend itself gave that is no TorchOp is a custom operator registered on it (it runs its
    // own code inside autograd, but is not a fallback).
    std::string why;
    for (const auto& r : refusals) why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", r.implementation, r.reason);
    if (!placement_.host() && !s.torch)
      throw Unimplemented(fmt::format(
          "network '{}': node '{}' ({}) would run {}, host code that cannot read {} memory{}; the torch executor "
          "runs on {} only where every node has an ATen kernel: leave the device out to run it on the host",
          net.name(), node->name, node->op_type, s.autograd_op->implementation(), placement_.device.to_string(),
          why.empty() ? "" : " (" + why + ")", placement_.device.to_string()));
    if (!refusals.empty()) fallbacks_.emplace_back(node->name, why);
    for (size_t i = 0; i < spec.inputs.size(); ++i) s.in.push_back(spec.has_input(i) ? slot(node->inputs[i]) : -1);
    const auto& descs = s.op->output_descs();
    for (size_t k = 0; k < descs.size(); ++k) {
      const bool named = k < node->outputs.size() && !node->outputs[k].empty();
      s.out.push_back(named ? slot(node->outputs[k]) : -1);
      s.out_type.push_back(scalar_type(descs[k].dtype));
      s.wanted.push_back(named);
    }
    steps_.push_back(std::move(s));
  }
  for (const auto& name : net.outputs()) slot(name);

  // Values no step computes.
  std::vector<bool> computed(slot_of_.size(), false);
  for (const auto& [name, i] : input_slots_) computed[static_cast<size_t>(i)] = true;
  for (const auto& s : steps_)
    for (int o : s.out)
      if (o >= 0) computed[static_cast<size_t>(o)] = true;
  keep_.assign(slot_of_.size(), false);
  for (const auto& [name, i] : slot_of_) {
    if (computed[static_cast<size_t>(i)]) continue;
    keep_[static_cast<size_t>(i)] = true;
    Binding b;
    b.name = name;
    b.slot = i;
    if (net.is_param(name)) {
      b.param = true;
      b.trainable = is_floating(net.desc(name).dtype);
    } else {
      const Tensor* known = net.known_value(name);
      D5_CHECK(known != nullptr, Internal, "network '{}': '{}' has no value and nothing computes it", net.name(),
               name);
      b.held = known->to(placement_.device);  // once per plan
      b.value = view_keeping(b.held);
      ++wrap_count_;
    }
    bindings_.push_back(std::move(b));
  }

  // Graph outputs stay; every other computed value goes after its last reader.
  for (const auto& name : net.outputs()) keep_[static_cast<size_t>(slot_of_.at(name))] = true;
  std::vector<int> last_reader(slot_of_.size(), -1);
  for (size_t k = 0; k < steps_.size(); ++k) {
    for (int i : steps_[k].in)
      if (i >= 0) last_reader[static_cast<size_t>(i)] = static_cast<int>(k);
  }
  for (size_t i = 0; i < last_reader.size(); ++i)
    if (last_reader[i] >= 0 && !keep_[i]) steps_[static_cast<size_t>(last_reader[i])].release.push_back(int(i));

  env_.assign(slot_of_.size(), at::Tensor());
  active_.clear();
  planned_version_ = net.version();
  planned_ = true;
  ++plan_count_;
}

const std::vector<bool>& TorchExecutor::active_steps(int loss_slot) {
  auto [it, added] = active_.try_emplace(loss_slot);
  if (!added) return it->second;
  // What the graph outputs and the loss depend on, walking producers back from them.
  std::vector<bool> needed(slot_of_.size(), false);
  for (const auto& name : network_.outputs()) needed[static_cast<size_t>(slot_of_.at(name))] = true;
  if (loss_slot >= 0) needed[static_cast<size_t>(loss_slot)] = true;
  std::vector<bool>& active = it->second;
  active.assign(steps_.size(), false);
  for (size_t k = steps_.size(); k-- > 0;) {
    for (int o : steps_[k].out) active[k] = active[k] || (o >= 0 && needed[static_cast<size_t>(o)]);
    if (active[k])
      for (int i : steps_[k].in)
        if (i >= 0) needed[static_cast<size_t>(i)] = true;
  }
  return active;
}

void TorchExecutor::bind_values(bool training) {
  for (auto& b : bindings_) {
    if (!b.param) {
      env_[static_cast<size_t>(b.slot)] = b.value;
      continue;
    }
    Tensor current = network_.fetch_tensor(b.name);
    if (current.device() != placement_.device) {
      // Moved once: the network holds the parameter on the device from now on, where optimizers
      // update it (FusedUpdates on the device) and the next call finds it.
      current = on_device(current);
      network_.feed_tensor(b.name, current);
    }
    if (!b.value.defined() || current.data() != b.held.data() || current.desc() != b.held.desc()) {
      b.held = current;
      b.value = view_keeping(current);
      if (b.trainable) b.value.requires_grad_(true);
      ++wrap_count_;
    }
    if (training && b.trainable && gradient_sink_ == GradientSink::accumulate) {
      // The gradient lands in a tensor of this executor's that the network holds under the
      // gradient name, made once. When the network holds another one (fed by the user or by
      // another executor), that one is replaced, never written: whoever holds it keeps its values.
      const std::string gname = Network::gradient_name(b.name);
      const bool ours = b.grad.defined() && b.grad.desc() == current.desc() && network_.has_value(gname) &&
                        network_.fetch_tensor(gname).data() == b.grad.data();
      if (!ours) {
        b.grad = Tensor(current.desc(), placement_.device);
        b.grad_view = view_keeping(b.grad);
        network_.feed_tensor(gname, b.grad);
      }
      b.value.mutable_grad() = b.grad_view;
    } else if (training && b.trainable) {
      if (b.value.grad().defined()) b.value.mutable_grad().reset();  // adopt: autograd::grad returns them instead
      // The network lets go of the last step's gradients, so that this step's backward pass can
      // reuse their memory as a hand-written loop that resets .grad does; holding them through the
      // step added a third more page faults and 4-6% to a ResNet-18 step. Whoever else holds
      // them keeps them.
      network_.release_value(Network::gradient_name(b.name));
    }
    env_[static_cast<size_t>(b.slot)] = b.value;
  }
}

void TorchExecutor::bind_feeds(const TensorMap& feeds) {
  for (const auto& [name, i] : input_slots_) env_[static_cast<size_t>(i)] = view_keeping(on_device(feeds.at(name)));
}

bool TorchExecutor::forward(bool training, int keep_slot) {
  const bool events = !events_.empty();
  const auto& active = active_steps(keep_slot);
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (!active[k]) continue;
    Step& s = steps_[k];
    Call c;
    c.in.resize(s.in.size());
    for (size_t i = 0; i < s.in.size(); ++i)
      if (s.in[i] >= 0) c.in[i] = env_[static_cast<size_t>(s.in[i])];
    c.wanted = s.wanted;
    c.replay = c.fresh = training;
    if (events) {
      if (!fire_before_operator(*s.node, Pass::forward, EventViews(c.in, placement_.device).views)) return false;
      if (training)
        c.in = observe_gradients(c.in, [this, node = s.node](const std::vector<at::Tensor>& g) {
          if (!fire_after_operator(*node, Pass::backward, EventViews(g, placement_.device).views)) throw StopBackward();
        });
    }
    std::vector<at::Tensor> res = s.torch ? s.torch->run_aten(c) : apply_custom_op(s.autograd_op, c.in);
    for (size_t j = 0; j < res.size(); ++j) {
      if (s.out[j] < 0) continue;
      if (res[j].scalar_type() != s.out_type[j]) res[j] = res[j].to(s.out_type[j]);
      if (res[j].device() != placement_.aten) {
        // A kernel's value made on the host when it was created (a constant it returns): counted.
        count_transfer(res[j].nbytes());
        res[j] = res[j].to(placement_.aten);
      }
      // Kernels read their inputs as the contiguous views TorchOp gives them.
      if (!res[j].is_contiguous()) res[j] = res[j].contiguous();
    }
    if (events) {
      if (training)
        res = observe_gradients(res, [this, node = s.node](const std::vector<at::Tensor>& g) {
          if (!fire_before_operator(*node, Pass::backward, EventViews(g, placement_.device).views)) throw StopBackward();
        });
      if (!fire_after_operator(*s.node, Pass::forward, EventViews(res, placement_.device).views)) return false;
    }
    for (size_t j = 0; j < res.size(); ++j)
      if (s.out[j] >= 0) env_[static_cast<size_t>(s.out[j])] = std::move(res[j]);
    for (int i : s.release)
      if (i != keep_slot) env_[static_cast<size_t>(i)] = at::Tensor();
  }
  return true;
}

TensorMap TorchExecutor::store_outputs(const std::vector<std::string>& names) {
  TensorMap out;
  for (const auto& name : names) {
    at::Tensor& slot = env_[static_cast<size_t>(slot_of_.at(name))];
    if (!slot.defined()) continue;  // not computed: the run stopped first
    // Handed over without a copy where ATen's buffer allows (inference results); an output in the
    // autograd graph, or a buffer something else holds, is copied. The slot keeps the value for
    // the rest of the call either way.
    const at::Tensor v = std::move(slot);
    Tensor t;
    if (placement_.host() || outputs_on_device_) {
      t = owned(v, network_.desc(name));
    } else {
      // The caller reads graph outputs on the host, as from every executor, unless it asked for
      // them where they are made (keep_outputs_on_device): one copy, straight from ATen's result.
      t = to_owned(v.detach().to(at::kCPU), network_.desc(name));
      count_transfer(t.bytes());
    }
    slot = v;
    network_.feed_tensor(name, t);
    out[name] = t;
  }
  return out;
}

void TorchExecutor::backward(const at::Tensor& loss) {
  std::vector<Binding*> trained;
  std::vector<at::Tensor> leaves;
  for (auto& b : bindings_)
    if (b.trainable) {
      trained.push_back(&b);
      leaves.push_back(b.value);
    }
  if (trained.empty()) return;
  const bool accumulate = gradient_sink_ == GradientSink::accumulate;
  if (accumulate)
    for (auto* b : trained) b->grad_view.zero_();
  // A parameter the loss does not depend on gets zeros.
  auto zeros_for_all = [&] {
    for (auto* b : trained)
      network_.feed_tensor(Network::gradient_name(b->name), Tensor(b->held.desc(), placement_.device));
  };
  if (!loss.requires_grad()) {
    if (!accumulate) zeros_for_all();
    return;
  }
  try {
    if (accumulate) {
      loss.backward();
      return;
    }
    auto grads = torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    for (size_t k = 0; k < trained.size(); ++k) {
      const TensorDesc& desc = trained[k]->held.desc();
      at::Tensor g = std::move(grads[k]);
      network_.feed_tensor(Network::gradient_name(trained[k]->name),
                           g.defined() ? owned(g, desc) : Tensor(desc, placement_.device));
    }
  } catch (const StopBackward&) {
    stopped_ = true;
  } catch (const c10::Error& e) {
    if (stopped_) return;  // the engine may wrap what a hook threw
    D5_THROW(InvalidArgument, "network '{}': backward (torch): {}", network_.name(), e.what_without_backtrace());
  }
}

TensorMap TorchExecutor::inference(const TensorMap& feeds) {
  if (!planned_ || network_.version() != planned_version_) plan();
  check_feeds(feeds);
  const DeterminismScope determinism(options_.deterministic);
  begin_memory();
  fire_before_executor(feeds);
  bind_values(false);
  bind_feeds(feeds);
  TensorMap outputs;
  bool done = false;
  {
    c10::InferenceMode guard;
    done = forward(false, -1);
    outputs = store_outputs(network_.outputs());
  }
  std::fill(env_.begin(), env_.end(), at::Tensor());
  end_memory();
  if (done) fire_after_inference(outputs);
  fire_after_executor(outputs);
  return outputs;
}

TensorMap TorchExecutor::inference_and_backprop(const TensorMap& feeds, const std::string& loss) {
  if (!planned_ || network_.version() != planned_version_) plan();
  check_feeds(feeds);
  auto loss_slot = slot_of_.find(loss);
  D5_CHECK_ARG(loss_slot != slot_of_.end(),
               "network '{}': loss '{}' is not a tensor the network computes (name a node output)",
               network_.name(), loss);
  const TensorDesc& loss_desc = network_.desc(loss);
  D5_CHECK_ARG(loss_desc.numel() == 1 && is_floating(loss_desc.dtype),
               "network '{}': loss '{}' must be one floating-point value, but it is {}", network_.name(), loss,
               loss_desc.to_string());
  const DeterminismScope determinism(options_.deterministic);
  begin_memory();
  fire_before_executor(feeds);
  bind_values(true);
  bind_feeds(feeds);
  TensorMap outputs;
  {
    at::AutoGradMode grad_mode(true);
    const bool done = forward(true, loss_slot->second);
    auto names = network_.outputs();
    if (std::find(names.begin(), names.end(), loss) == names.end()) names.push_back(loss);
    outputs = store_outputs(names);
    if (done) {
      fire_after_inference(outputs);
      backward(env_[static_cast<size_t>(loss_slot->second)]);
    }
  }
  std::fill(env_.begin(), env_.end(), at::Tensor());
  end_memory();
  if (!stopped_) {
    TensorMap gradients;
    for (const auto& b : bindings_)
      if (b.trainable) gradients[Network::gradient_name(b.name)] = network_.fetch_tensor(Network::gradient_name(b.name));
    fire_after_backprop(gradients);
  }
  fire_after_executor(outputs);
  return outputs;
}

std::map<std::string, std::string> TorchExecutor::implementations() const {
  std::map<std::string, std::string> out;
  for (const auto& n : network_.nodes())
    if (network_.is_folded(n.name)) out[n.name] = "folded (computed at inference)";
  // A custom operator is named as itself ("native:cube"): it runs as it is inside autograd.
  for (const auto& s : steps_) out[s.node->name] = (s.torch ? s.op : s.autograd_op)->implementation();
  for (const auto& [node, why] : fallbacks_) out[node] = fmt::format("{} (fallback: {})", out[node], why);
  return out;
}

std::vector<std::pair<std::string, std::string>> TorchExecutor::fallbacks() const { return fallbacks_; }

void TorchExecutor::begin_memory() {
  memory_ = ExecutorMemory{};
  if (measure_rss_) reset_peak_rss();
}

void TorchExecutor::end_memory() {
  // On a device the call returns when its work is done, as on the host: the backward pass was
  // queued after the outputs were read, and a caller timing the call would otherwise time only
  // the queueing.
  if (!placement_.host()) allocator_for(placement_.device).synchronize(placement_.device.index);
  if (measure_rss_) memory_.peak_rss_bytes = peak_rss_bytes();
}

}  // namespace d5::torch_backend
