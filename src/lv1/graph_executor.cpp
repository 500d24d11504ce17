#include "deep500/net/graph_executor.h"
#include "deep500/net/replaying_executor.h"

#include <algorithm>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/error.h"
#include "deep500/core/registry.h"

namespace d5 {

void GraphExecutor::check_feeds(const TensorMap& feeds) const {
  const Network& net = network_;
  for (const auto& name : net.inputs()) {
    auto it = feeds.find(name);
    D5_CHECK_ARG(it != feeds.end(), "network '{}': graph input '{}' was not fed", net.name(), name);
    const TensorDesc& want = net.desc(name);
    D5_CHECK_ARG(it->second.dtype() == want.dtype && it->second.shape() == want.shape,
                 "network '{}': graph input '{}' must be {}, but was fed {}", net.name(), name, want.to_string(),
                 it->second.desc().to_string());
  }
  for (const auto& [name, t] : feeds)
    D5_CHECK_ARG(std::find(net.inputs().begin(), net.inputs().end(), name) != net.inputs().end(),
                 "network '{}': '{}' was fed but is not a graph input (inputs: {})", net.name(), name,
                 fmt::join(net.inputs(), ", "));
}

void GraphExecutor::fire_before_executor(const TensorMap& feeds) {
  stopped_ = false;
  for (auto& e : events_) e->before_executor(feeds);
}

bool GraphExecutor::fire_before_operator(const Node& node, Pass pass, std::span<const Tensor> inputs) {
  for (auto& e : events_)
    if (!e->before_operator(node, pass, inputs)) stopped_ = true;
  return !stopped_;
}

bool GraphExecutor::fire_after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs) {
  for (auto& e : events_)
    if (!e->after_operator(node, pass, outputs)) stopped_ = true;
  return !stopped_;
}

void GraphExecutor::fire_after_inference(const TensorMap& outputs) {
  for (auto& e : events_) e->after_inference(outputs);
}

void GraphExecutor::fire_after_backprop(const TensorMap& gradients) {
  for (auto& e : events_) e->after_backprop(gradients);
}

void GraphExecutor::fire_after_executor(const TensorMap& outputs) {
  for (auto& e : events_) e->after_executor(outputs);
}

namespace {
Registry<ExecutorFactory>& executors() {
  static Registry<ExecutorFactory> r("graph executor", Registry<ExecutorFactory>::Order::name);
  return r;
}

struct DeviceTakers {
  std::mutex mutex;
  std::set<std::string> backends;
};
DeviceTakers& device_takers() {
  static DeviceTakers d;
  return d;
}

bool takes_device(const std::string& backend) {
  DeviceTakers& d = device_takers();
  std::lock_guard lock(d.mutex);
  return d.backends.count(backend) > 0;
}
}  // namespace

void register_executor(const std::string& backend, ExecutorFactory factory, bool takes_device) {
  executors().add(backend, "", std::move(factory));
  if (takes_device) {
    DeviceTakers& d = device_takers();
    std::lock_guard lock(d.mutex);
    d.backends.insert(backend);
  }
}

// Only executors that can run here: a built backend without its device (cuda on a machine
// without a GPU) keeps its executor registered, so that asking for it names the reason.
std::vector<std::string> executor_backends() {
  std::vector<std::string> names;
  for (const auto& name : executors().names()) {
    const auto info = find_backend(name);
    if (!info || info->available) names.push_back(name);
  }
  return names;
}

std::unique_ptr<GraphExecutor> make_executor(Network& network, const std::string& backend,
                                             const ExecutorOptions& options) {
  // A backend left out of this build (rebuild with it), a built backend without an executor, or
  // a name deep500 does not have (a typo): three answers, three exit codes.
  const auto factory = executors().find(backend);
  if (!factory) {
    if (is_not_built_backend(backend))
      throw NotBuilt(fmt::format("this d5 was built without the {} backend, so it has no {} executor; install its "
                                 "dependency and reconfigure (docs/building.md; executors here: {})",
                                 backend, backend, executors().known()));
    if (find_backend(backend))
      throw Unimplemented(fmt::format("backend '{}' has no graph executor yet (executors: {})", backend,
                                      executors().known()));
    throw InvalidArgument(fmt::format("no backend '{}' (executors: {})", backend, executors().known()));
  }
  if (const auto info = find_backend(backend); info && !info->available)
    throw Unimplemented(fmt::format("the {} executor cannot run here: {}", backend, info->unavailable_reason));
  if (!options.device.empty() && !takes_device(backend))
    throw Unimplemented(fmt::format("the {} executor runs where its backend does and takes no device ('{}'); "
                                      "a device is chosen for the torch executor", backend, options.device));
  if (options.cuda_graphs) {
    const StepRecorderFactory recorder = step_recorder_for(backend);
    if (!recorder)
      throw Unimplemented(fmt::format("the {} executor cannot record a step as a CUDA graph (--cuda-graphs): only the "
                                      "cuda executor does",
                                      backend));
    return std::make_unique<ReplayingExecutor>(network, (*factory)(network, options), recorder());
  }
  return (*factory)(network, options);
}

}  // namespace d5
