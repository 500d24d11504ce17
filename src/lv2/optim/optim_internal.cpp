#include "optim_internal.h"

#include <fmt/format.h>

namespace d5::optim {

namespace {
thread_local DeferredChunks* current_deferred = nullptr;
}

DeferredChunks::DeferredChunks() : outer_(current_deferred) { current_deferred = this; }

DeferredChunks::~DeferredChunks() {
  current_deferred = outer_;
  run();
}

DeferredChunks* DeferredChunks::current() { return current_deferred; }

void DeferredChunks::add(int64_t n, Body body) {
  if (n <= 0) return;
  bodies_.push_back(std::move(body));
  for (int64_t b = 0; b < n; b += kChunk) work_.push_back({bodies_.size() - 1, b, std::min(n, b + kChunk)});
}

void DeferredChunks::add(Device device, const FusedUpdate& update) {
  if (update.n > 0) device_work_.emplace_back(device, update);
}

void DeferredChunks::run() {
  const auto chunks = static_cast<int64_t>(work_.size());
#pragma omp parallel for schedule(static) if (chunks > 2)
  for (int64_t c = 0; c < chunks; ++c) {
    const Work& w = work_[static_cast<size_t>(c)];
    bodies_[w.body](w.begin, w.end);
  }
  work_.clear();
  bodies_.clear();
  if (device_work_.empty()) return;
  // Each device gets its updates in one apply, in the order they were made. Nothing is deferred
  // meanwhile: a device whose memory is the host's runs its loops inside apply.
  auto work = std::move(device_work_);
  device_work_.clear();
  struct Undefer {
    DeferredChunks* saved = current_deferred;
    Undefer() { current_deferred = nullptr; }
    ~Undefer() { current_deferred = saved; }
  } undefer;
  std::vector<bool> done(work.size(), false);
  for (size_t i = 0; i < work.size(); ++i) {
    if (done[i]) continue;
    const Device device = work[i].first;
    std::vector<FusedUpdate> batch;
    for (size_t j = i; j < work.size(); ++j) {
      if (done[j] || !(work[j].first == device)) continue;
      batch.push_back(work[j].second);
      done[j] = true;
    }
    fused_updates_for(device.kind)->apply(device.index, batch);
  }
}

Tensor scalar_tensor(double v) {
  Tensor t(DType::f64, Shape{});
  t.set(0, v);
  return t;
}

const Tensor& state_entry(const OptimizerState& state, const std::string& key, const std::string& optimizer) {
  auto it = state.find(key);
  D5_CHECK_ARG(it != state.end(), "optimizer '{}': the state has no '{}' (was it saved by another optimizer?)",
               optimizer, key);
  return it->second;
}

double scalar_of(const OptimizerState& state, const std::string& key, const std::string& optimizer) {
  const Tensor& t = state_entry(state, key, optimizer);
  D5_CHECK_ARG(t.numel() == 1, "optimizer '{}': state entry '{}' must be a scalar, it is {}", optimizer,
               key, t.desc().to_string());
  return t.get(0);
}

void check_f32(const std::string& optimizer, const std::string& param, const Tensor& grad, const Tensor& value) {
  D5_CHECK_ARG(value.dtype() == DType::f32 && grad.dtype() == DType::f32,
               "optimizer '{}' updates float32 parameters; '{}' is {} with a {} gradient (cast the network's "
               "parameters to float32)",
               optimizer, param, to_string(value.dtype()), to_string(grad.dtype()));
  D5_CHECK_ARG(value.device() == grad.device(), "optimizer '{}': parameter '{}' is on {}, its gradient on {}",
               optimizer, param, value.device().to_string(), grad.device().to_string());
  D5_CHECK_ARG(value.device().kind == DeviceKind::cpu || fused_updates_for(value.device().kind) != nullptr,
               "optimizer '{}' cannot update parameter '{}' on {}: no update kernels are registered for that "
               "device (they come with its backend); keep the parameters on the host",
               optimizer, param, value.device().to_string());
}

float* Buffers::get(const std::string& param, const Tensor& like, double init) {
  auto it = m_.find(param);
  if (it == m_.end()) {
    const TensorDesc desc{DType::f32, like.shape(), Layout::any};
    Tensor t(desc, init == 0 ? like.device() : Device::cpu());  // zeroed where it lives
    if (init != 0) {
      t.fill(init);
      t = t.to(like.device());
    }
    it = m_.emplace(param, std::move(t)).first;
  }
  D5_CHECK_ARG(it->second.shape() == like.shape(), "optimizer state '{}' of '{}' has shape {}, the parameter {}",
               name_, param, it->second.shape().to_string(), like.shape().to_string());
  // State loaded from a checkpoint is on the host; it follows its parameter once.
  if (!(it->second.device() == like.device())) it->second = it->second.to(like.device());
  return static_cast<float*>(it->second.data());  // a device's memory when the parameter is there
}

void Buffers::save(OptimizerState& s) const {
  for (const auto& [p, t] : m_) s[name_ + "/" + p] = t.device() == Device::cpu() ? t.clone() : t.to(Device::cpu());
}

void Buffers::load(const OptimizerState& s) {
  m_.clear();
  const std::string prefix = name_ + "/";
  for (const auto& [k, t] : s) {
    if (k.rfind(prefix, 0) != 0) continue;
    D5_CHECK_ARG(t.dtype() == DType::f32, "optimizer state '{}' must be float32, it is {}", k,
                 t.desc().to_string());
    m_[k.substr(prefix.size())] = t.clone();
  }
}

void Scalars::save(OptimizerState& s) const {
  for (const auto& [p, v] : m_) s[name_ + "/" + p] = scalar_tensor(v);
}

void Scalars::load(const OptimizerState& s) {
  m_.clear();
  const std::string prefix = name_ + "/";
  for (const auto& [k, t] : s) {
    if (k.rfind(prefix, 0) != 0) continue;
    D5_CHECK_ARG(t.numel() == 1, "optimizer state '{}' must be a scalar, it is {}", k, t.desc().to_string());
    m_[k.substr(prefix.size())] = t.get(0);
  }
}

}  // namespace d5::optim
