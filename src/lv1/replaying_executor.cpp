#include "deep500/net/replaying_executor.h"

#include <mutex>

#include <fmt/format.h>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {
constexpr const char* kFirstOfItsKind =
    "the first call of a step kind, or after a parameter was replaced, runs as usual: it chooses algorithms, sizes "
    "workspaces and places parameters";

struct Recorders {
  std::mutex mutex;
  std::map<std::string, StepRecorderFactory> by_backend;
};
Recorders& recorders() {
  static Recorders r;
  return r;
}
}  // namespace

void register_step_recorder(const std::string& backend, StepRecorderFactory factory) {
  Recorders& r = recorders();
  std::lock_guard lock(r.mutex);
  r.by_backend[backend] = std::move(factory);
}

StepRecorderFactory step_recorder_for(const std::string& backend) {
  Recorders& r = recorders();
  std::lock_guard lock(r.mutex);
  auto it = r.by_backend.find(backend);
  return it == r.by_backend.end() ? StepRecorderFactory{} : it->second;
}

nlohmann::json replay_report_json(GraphExecutor& ex) {
  auto* replaying = dynamic_cast<ReplayingExecutor*>(&ex);
  if (!replaying) return nullptr;
  const ReplayReport& r = replaying->report();
  return {{"recorder", r.recorder},
          {"recordings", r.recordings},
          {"replays", r.replays},
          {"unrecorded_calls", r.unrecorded_calls},
          {"last_unrecorded_why", r.last_unrecorded_why}};
}

ReplayingExecutor::ReplayingExecutor(Network& network, std::unique_ptr<GraphExecutor> inner,
                                     std::unique_ptr<StepRecorder> recorder)
    : GraphExecutor(network), inner_(std::move(inner)), recorder_(std::move(recorder)) {
  D5_CHECK_ARG(inner_ && recorder_, "a replaying executor needs an executor and a recorder");
  D5_CHECK_ARG(&inner_->network() == &network, "the wrapped executor runs another network");
  report_.recorder = recorder_->name();
}

// The recording's buffers go before the recorder's pool, which outlives them anyway.
ReplayingExecutor::~ReplayingExecutor() {
  recording_.reset();
  recorder_->discard();
}

std::string ReplayingExecutor::kind_of(const TensorMap& feeds, const std::string& loss) const {
  std::string kind = fmt::format("loss '{}', network version {}", loss, network_.version());
  for (const auto& [name, t] : feeds) kind += fmt::format(", {}: {}", name, t.desc().to_string());
  return kind;
}

std::string ReplayingExecutor::parameter_places() const {
  std::string places;
  for (const auto& name : network_.get_params()) {
    if (!network_.has_value(name)) continue;
    const Tensor t = network_.fetch_tensor(name);
    places += fmt::format("{}@{}/{};", name, t.data(), t.device().to_string());
  }
  return places;
}

TensorMap ReplayingExecutor::call(const TensorMap& feeds, const std::string& loss) {
  check_feeds(feeds);
  stopped_ = false;
  if (!events_.empty())
    return run_wrapped(feeds, loss, "executor events are attached, and a replayed step cannot call them per operator");
  const std::string kind = kind_of(feeds, loss);
  if (auto it = refused_.find(kind); it != refused_.end()) return run_wrapped(feeds, loss, it->second);
  const std::string places = parameter_places();
  if (recording_ && recording_->kind == kind && recording_->parameters == places) return replay(feeds, true);
  // A new kind, a replaced parameter or a changed network: the old recording cannot serve. The
  // wrapped executor runs the step first (it moves new parameters to the device, which a
  // recording cannot hold); the call after records.
  recording_.reset();
  recorder_->discard();
  if (!warmed_.count(kind + places)) {
    TensorMap out = run_wrapped(feeds, loss, kFirstOfItsKind);
    // An optimizer that replaced its parameters at every step would add one entry per step.
    if (warmed_.size() >= 64) warmed_.clear();
    warmed_.insert(kind + parameter_places());
    return out;
  }
  if (std::string why = record(feeds, loss); !why.empty()) {
    refused_[kind] = why;
    return run_wrapped(feeds, loss, why);
  }
  ++report_.recordings;
  return replay(feeds, false);
}

TensorMap ReplayingExecutor::run_wrapped(const TensorMap& feeds, const std::string& loss, const std::string& why) {
  for (const auto& e : events_) inner_->add_event(e);
  TensorMap out;
  try {
    out = loss.empty() ? inner_->inference(feeds) : inner_->inference_and_backprop(feeds, loss);
  } catch (...) {
    inner_->clear_events();
    throw;
  }
  inner_->clear_events();
  stopped_ = inner_->stopped();
  ++report_.unrecorded_calls;
  report_.last_unrecorded_why = why;
  memory_ = inner_->memory();
  // Once a step was recorded the wrapped executor keeps its outputs on the device.
  return for_caller(out, memory_.transfers, memory_.transfer_bytes);
}

std::string ReplayingExecutor::record(const TensorMap& feeds, const std::string& loss) {
  if (const auto fallbacks = inner_->fallbacks(); !fallbacks.empty())
    return fmt::format("node '{}' runs on the host ({}), and a recorded step holds device work only",
                       fallbacks.front().first, fallbacks.front().second);
  const std::map<std::string, Device> devices = inner_->feed_devices(loss);
  Recording r;
  r.kind = kind_of(feeds, loss);
  for (const auto& [name, value] : feeds) {
    auto it = devices.find(name);
    if (it == devices.end()) {  // the step does not read it; the executor still wants every input
      r.feeds[name] = value.clone();
      r.unread.insert(name);
      continue;
    }
    if (host_accessible(it->second))
      return fmt::format("graph input '{}' is read on the host, and a recorded step holds device work only", name);
    Tensor buffer = Tensor::uninitialized(value.desc(), it->second);
    buffer.copy_from(value);
    r.feeds[name] = std::move(buffer);
  }
  if (!inner_->keep_outputs_on_device())
    return "the wrapped executor cannot leave its outputs on the device, and copying them to the host is not recordable";
  // The step reads only what it captured by value: a recorder may run it again.
  r.produced = std::make_shared<Produced>();
  const std::string why = recorder_->record([this, feeds = r.feeds, loss, produced = r.produced] {
    produced->outputs = loss.empty() ? inner_->inference(feeds) : inner_->inference_and_backprop(feeds, loss);
    produced->gradients.clear();
    if (!loss.empty())
      for (const auto& [param, gradient] : network_.gradient())
        if (network_.has_value(gradient)) produced->gradients[gradient] = network_.fetch_tensor(gradient);
  });
  if (!why.empty()) return why;
  r.parameters = parameter_places();
  memory_ = inner_->memory();
  recording_ = std::move(r);
  return "";
}

// copy_feeds: false right after record(), which copied them.
TensorMap ReplayingExecutor::replay(const TensorMap& feeds, bool copy_feeds) {
  Recording& r = *recording_;
  int64_t transfers = 0, bytes = 0;
  for (const auto& [name, value] : feeds) {
    Tensor& buffer = r.feeds.at(name);
    if (!copy_feeds || r.unread.count(name) || value.data() == buffer.data()) continue;
    buffer.copy_from(value);
    if (!(value.device() == buffer.device())) {
      ++transfers;
      bytes += static_cast<int64_t>(value.bytes());
    }
  }
  ++report_.replays;  // counted before the operators' checks, which may throw after the launch
  recorder_->replay();
  for (const auto& [name, g] : r.produced->gradients) network_.feed_tensor(name, g);
  TensorMap result;
  for (const auto& [name, value] : r.produced->outputs) result[name] = value.clone();
  result = for_caller(result, transfers, bytes);
  memory_.transfers = transfers;
  memory_.transfer_bytes = bytes;
  return result;
}

// Outputs where the caller asked for them (the host unless keep_outputs_on_device), also stored
// in the network as every executor does.
TensorMap ReplayingExecutor::for_caller(const TensorMap& outputs, int64_t& transfers, int64_t& bytes) {
  TensorMap result;
  for (const auto& [name, value] : outputs) {
    Tensor t = value;
    if (!outputs_on_device_ && !t.on_host()) {
      t = value.to(Device::cpu());
      ++transfers;
      bytes += static_cast<int64_t>(t.bytes());
    }
    if (!network_.is_initializer(name)) network_.feed_tensor(name, t);
    result[name] = std::move(t);
  }
  return result;
}

}  // namespace d5
