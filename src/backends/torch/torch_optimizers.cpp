// Native twins of the reference optimizers: torch::optim run on the network's own parameters.
//
// Each parameter is an at::Tensor view (from_blob) of the d5 buffer the network holds, and before
// each update its .grad() is set to a view of the gradient the executor stored, so torch::optim
// reads and writes deep500's memory directly, with no copy either way. The views are made again
// only when the network holds another buffer for a parameter (after feed_tensor); the optimizer's
// state then moves to the new views through its serialized form. Hyperparameters have the same
// names and defaults as the reference optimizer of the same name (docs/optimizers.md); the
// learning-rate schedule sets the param group's lr before every step. Parameters on a device are
// viewed as ATen's tensors there (torch_device.h: d5's cuda:N as ATen's CUDA device N), so the
// update runs where they lie, queued on the stream d5's kernels use.
#include <sstream>

#include <torch/optim.h>
#include <torch/serialize.h>

#include <fmt/format.h>

#include "deep500/train/optimizer.h"
#include "torch_device.h"

namespace d5::torch_backend {

namespace {

// The ATen device that reads t's memory; refuses, with torch_placement's reason, a device ATen has
// no counterpart for, or cuda where LibTorch was built without it.
at::Device aten_device_of(const Tensor& t) {
  return t.device() == Device::cpu() ? at::Device(at::kCPU) : torch_placement(t.device().to_string()).aten;
}

at::Tensor view_of(Tensor& t, at::Device device) {
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  return at::from_blob(t.data(), dims, at::TensorOptions().dtype(at::kFloat).device(device));
}

class TorchOptimizer final : public Optimizer {
 public:
  TorchOptimizer(std::string base, const Hyperparameters& h)
      : Optimizer(make_optimizer(base)->hyperparameters(), h), base_(std::move(base)) {}

  std::string name() const override { return "torch-" + base_; }

  TensorMap step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) override {
    Network& net = executor.network();
    // The views are bound after the executor's call: an executor on a device moves the
    // parameters there at its first call, and the network then holds the moved ones.
    TensorMap outputs = executor.inference_and_backprop(feeds, loss);
    run_gradient_hook(net);
    bind(net);
    set_lr(current_learning_rate());
    attach_gradients(net);
    if (base_ == "lbfgs") {
      // L-BFGS evaluates the loss at the current parameters first: that is the call above.
      bool first = true;
      opt_->step([&]() -> at::Tensor {
        const TensorMap out = first ? outputs : executor.inference_and_backprop(feeds, loss);
        if (!first) {
          run_gradient_hook(net);
          attach_gradients(net);
        }
        first = false;
        auto it = out.find(loss);
        D5_CHECK_ARG(it != out.end() && it->second.numel() == 1, "{}: the executor returned no scalar loss '{}'",
                     name(), loss);
        return at::scalar_tensor(it->second.get(0), at::kDouble);
      });
    } else {
      opt_->step();
    }
    for (auto& p : params_) p.mutable_grad().reset();  // the gradient views must not outlive this step
    grads_held_.clear();
    count_step();
    return outputs;
  }

  OptimizerState state() const override {
    OptimizerState s = Optimizer::state();
    if (!opt_ && pending_.empty()) return s;
    std::string bytes = pending_;
    if (opt_) {
      std::ostringstream out;
      torch::save(*opt_, out);
      bytes = out.str();
    }
    Tensor archive(DType::u8, Shape{static_cast<int64_t>(bytes.size())});
    std::memcpy(archive.data(), bytes.data(), bytes.size());
    s["torch/archive"] = archive;
    return s;
  }

  void load_state(const OptimizerState& s) override {
    Optimizer::load_state(s);
    auto it = s.find("torch/archive");
    pending_.clear();
    if (it == s.end()) return;
    D5_CHECK_ARG(it->second.dtype() == DType::u8, "{}: state entry 'torch/archive' must be u8 bytes", name());
    pending_.assign(static_cast<const char*>(it->second.data()), it->second.bytes());
    if (opt_) load_pending();
  }

 private:
  // (Re)creates the views and the optimizer when the parameter set or a buffer changed.
  void bind(Network& net) {
    std::vector<std::string> names;
    std::vector<const void*> buffers;
    for (const auto& [p, g] : net.gradient()) {
      names.push_back(p);
      buffers.push_back(net.fetch_tensor(p).data());
    }
    if (opt_ && names == names_ && buffers == buffers_) return;
    if (opt_ && pending_.empty()) {
      std::ostringstream out;
      torch::save(*opt_, out);
      pending_ = out.str();
    }
    D5_CHECK_ARG(!names.empty(), "{}: the network has no parameters to train", name());
    names_ = names;
    buffers_ = buffers;
    held_.clear();
    params_.clear();
    for (const auto& p : names) {
      Tensor t = net.fetch_tensor(p);
      D5_CHECK_ARG(t.dtype() == DType::f32, "{} updates float32 parameters; '{}' is {}", name(), p,
                   t.desc().to_string());
      params_.push_back(view_of(t, aten_device_of(t)));
      held_.push_back(std::move(t));
    }
    opt_ = create();
    if (!pending_.empty()) load_pending();
  }

  void load_pending() {
    std::istringstream in(pending_);
    try {
      torch::load(*opt_, in);
    } catch (const c10::Error& e) {
      throw InvalidArgument(fmt::format("{}: cannot load the saved torch::optim state ({})", name(),
                                        e.what_without_backtrace()));
    }
    pending_.clear();
  }

  void attach_gradients(Network& net) {
    grads_held_.clear();
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::string g = Network::gradient_name(names_[i]);
      if (!net.has_value(g)) {
        params_[i].mutable_grad().reset();
        continue;
      }
      Tensor grad = net.fetch_tensor(g);
      D5_CHECK_ARG(grad.dtype() == DType::f32 && grad.shape() == held_[i].shape() &&
                       grad.device() == held_[i].device(),
                   "{}: gradient of '{}' is {} on {}, the parameter {} on {}", name(), names_[i],
                   grad.desc().to_string(), grad.device().to_string(), held_[i].desc().to_string(),
                   held_[i].device().to_string());
      params_[i].mutable_grad() = view_of(grad, params_[i].device());
      grads_held_.push_back(std::move(grad));
    }
  }

  double h(const char* key) const { return hyper_.at(key); }

  std::unique_ptr<torch::optim::Optimizer> create() {
    using namespace torch::optim;
    if (base_ == "sgd" || base_ == "momentum" || base_ == "nesterov") {
      return std::make_unique<SGD>(params_, SGDOptions(h("lr"))
                                                .momentum(h("momentum"))
                                                .dampening(h("dampening"))
                                                .weight_decay(h("weight_decay"))
                                                .nesterov(base_ == "nesterov"));
    }
    if (base_ == "adam") {
      return std::make_unique<Adam>(params_, AdamOptions(h("lr"))
                                                 .betas({h("beta1"), h("beta2")})
                                                 .eps(h("eps"))
                                                 .weight_decay(h("weight_decay"))
                                                 .amsgrad(h("amsgrad") != 0));
    }
    if (base_ == "adamw") {
      return std::make_unique<AdamW>(params_, AdamWOptions(h("lr"))
                                                  .betas({h("beta1"), h("beta2")})
                                                  .eps(h("eps"))
                                                  .weight_decay(h("weight_decay"))
                                                  .amsgrad(h("amsgrad") != 0));
    }
    if (base_ == "adagrad") {
      return std::make_unique<Adagrad>(params_, AdagradOptions(h("lr"))
                                                    .lr_decay(h("lr_decay"))
                                                    .weight_decay(h("weight_decay"))
                                                    .initial_accumulator_value(h("initial_accumulator_value"))
                                                    .eps(h("eps")));
    }
    if (base_ == "rmsprop") {
      return std::make_unique<RMSprop>(params_, RMSpropOptions(h("lr"))
                                                    .alpha(h("alpha"))
                                                    .eps(h("eps"))
                                                    .weight_decay(h("weight_decay"))
                                                    .momentum(h("momentum"))
                                                    .centered(h("centered") != 0));
    }
    if (base_ == "lbfgs") {
      LBFGSOptions o(h("lr"));
      o.max_iter(static_cast<int64_t>(h("max_iter")))
          .tolerance_grad(h("tolerance_grad"))
          .tolerance_change(h("tolerance_change"))
          .history_size(static_cast<int64_t>(h("history_size")));
      if (h("max_eval") >= 0) o.max_eval(static_cast<int64_t>(h("max_eval")));
      if (h("line_search") != 0) o.line_search_fn("strong_wolfe");
      return std::make_unique<LBFGS>(params_, o);
    }
    D5_THROW(Internal, "no torch::optim twin for '{}'", base_);
  }

  void set_lr(double lr) {
    for (auto& group : opt_->param_groups()) group.options().set_lr(lr);
  }

  std::string base_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  std::vector<std::string> names_;
  std::vector<const void*> buffers_;
  std::vector<Tensor> held_;        // keeps the viewed parameter buffers alive
  std::vector<at::Tensor> params_;  // views of held_
  std::vector<Tensor> grads_held_;  // keeps this step's gradient buffers alive while viewed
  std::string pending_;             // a serialized state to load once the views exist
};

}  // namespace

void register_optimizers() {
  for (const char* b : {"sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop", "lbfgs"}) {
    const std::string base = b;
    register_optimizer("torch-" + base, fmt::format("torch::optim twin of '{}' on the network's parameters", base),
                       [base](const Hyperparameters& hp) { return std::make_unique<TorchOptimizer>(base, hp); });
  }
}

}  // namespace d5::torch_backend
