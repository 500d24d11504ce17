#pragma once
// Runs a network's forward pass node by node through the reference operators: the plainest
// possible executor, so zoo tests check the models and not an executor.
#include <map>
#include <string>
#include <vector>

#include "deep500/network.h"
#include "deep500/op_registry.h"

namespace d5::test {

inline std::map<std::string, Tensor> reference_forward(const Network& net, const std::map<std::string, Tensor>& feeds) {
  net.infer();
  std::map<std::string, Tensor> values = feeds;
  auto lookup = [&](const std::string& name) -> Tensor {
    if (auto it = values.find(name); it != values.end()) return it->second;
    if (const Tensor* k = net.known_value(name)) return *k;
    return net.fetch_tensor(name);  // a parameter
  };
  for (const Node* node : net.topological_order()) {
    if (net.is_folded(node->name)) continue;
    auto op = OpRegistry::global().create(net.spec(node->name), "reference");
    std::vector<Tensor> inputs;
    for (const auto& in : node->inputs) inputs.push_back(in.empty() ? Tensor() : lookup(in));
    while (inputs.size() > net.spec(node->name).inputs.size()) inputs.pop_back();  // trailing absent ones
    auto outputs = op->run_forward(inputs);
    for (size_t i = 0; i < node->outputs.size(); ++i)
      if (!node->outputs[i].empty()) values[node->outputs[i]] = outputs[i];
  }
  std::map<std::string, Tensor> result;
  for (const auto& o : net.outputs()) result[o] = lookup(o);
  return result;
}

}  // namespace d5::test
