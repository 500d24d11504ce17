#pragma once
// The model side of the serial oracle (serial_schemes.h): one replica's loss gradient for given
// parameters and a batch, computed by the reference executor (Level 1) on a network with a loss.
// Parameters and gradients are flat vectors in Network::gradient() order, packed here rather
// than by the distributed schemes' helpers.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "deep500/net/graph_executor.h"
#include "deep500/net/network.h"
#include "serial_schemes.h"

namespace d5::test {

class ReplicaGradient {
 public:
  ReplicaGradient(Network network, std::string loss)
      : net_(std::make_unique<Network>(std::move(network))), loss_(std::move(loss)) {
    ExecutorOptions eo;
    eo.deterministic = true;
    exec_ = make_executor(*net_, "reference", eo);
  }

  // The parameters' names, in the order of the flat vectors.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [param, grad] : net_->gradient()) out.push_back(param);
    return out;
  }
  Flat parameters() const { return parameters_of(*net_, names()); }

  Flat operator()(const Flat& params, const TensorMap& feeds) {
    size_t at = 0;
    for (const auto& [param, grad] : net_->gradient()) {
      Tensor p = net_->fetch_tensor(param);
      std::memcpy(p.data_as<float>(), params.data() + at, static_cast<size_t>(p.numel()) * sizeof(float));
      at += static_cast<size_t>(p.numel());
    }
    exec_->inference_and_backprop(feeds, loss_);
    Flat g;
    g.reserve(params.size());
    for (const auto& [param, grad] : net_->gradient()) {
      const Tensor t = net_->fetch_tensor(grad);
      g.insert(g.end(), t.data_as<float>(), t.data_as<float>() + t.numel());
    }
    return g;
  }

  // The named f32 tensors of any network (a saved model), concatenated in the given order.
  static Flat parameters_of(const Network& net, const std::vector<std::string>& names) {
    Flat out;
    for (const auto& n : names) {
      const Tensor t = net.fetch_tensor(n);
      out.insert(out.end(), t.data_as<float>(), t.data_as<float>() + t.numel());
    }
    return out;
  }

 private:
  std::unique_ptr<Network> net_;
  std::string loss_;
  std::unique_ptr<GraphExecutor> exec_;
};

}  // namespace d5::test
