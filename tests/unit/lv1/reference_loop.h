#pragma once
// The oracle for executor tests: a network run node by node on reference operators, in
// topological order, then reverse mode through each operator's own backward, summing the
// gradients of tensors read by several nodes. Deliberately plain: nothing is freed or fused.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep500/graph_executor.h"
#include "deep500/op_registry.h"

namespace d5::test {

struct ReferenceRun {
  TensorMap values;     // every tensor computed or read
  TensorMap gradients;  // parameter gradient name -> value (zeros for parameters the loss ignores)
};

inline ReferenceRun reference_run(const Network& net, const TensorMap& feeds, const std::string& loss = "") {
  net.infer();
  ReferenceRun r;
  r.values = feeds;
  for (const auto& name : net.initializers()) r.values[name] = net.fetch_tensor(name);
  struct Done {
    const Node* node;
    std::unique_ptr<Operator> op;
    std::vector<Tensor> in, out;
  };
  std::vector<Done> done;
  for (const Node* node : net.topological_order()) {
    const OpSpec& spec = net.spec(node->name);
    Done d{node, OpRegistry::global().create(spec, "reference"), {}, {}};
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      d.in.push_back(spec.has_input(i) ? r.values.at(node->inputs[i]) : Tensor());
    d.out = d.op->run_forward(d.in);
    for (size_t k = 0; k < node->outputs.size(); ++k)
      if (!node->outputs[k].empty()) r.values[node->outputs[k]] = d.out[k];
    done.push_back(std::move(d));
  }
  if (loss.empty()) return r;

  TensorMap grads;
  Tensor seed(r.values.at(loss).desc());
  seed.fill(1);
  grads[loss] = seed;
  for (auto it = done.rbegin(); it != done.rend(); ++it) {
    const Node& node = *it->node;
    std::vector<Tensor> gy(it->out.size());
    bool any = false;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      auto g = grads.find(node.outputs[k]);
      if (node.outputs[k].empty() || g == grads.end()) continue;
      gy[k] = g->second;
      any = true;
    }
    const auto mask = it->op->differentiable_inputs();
    if (!any || mask.empty()) continue;
    const auto gx = it->op->run_backward(gy, it->in, it->out);
    for (size_t i = 0; i < gx.size(); ++i) {
      if (!gx[i].defined() || !is_floating(gx[i].dtype())) continue;
      auto [g, fresh] = grads.try_emplace(node.inputs[i], gx[i]);
      if (fresh) continue;
      Tensor sum = g->second.clone();
      for (int64_t e = 0; e < sum.numel(); ++e) sum.set(e, sum.get(e) + gx[i].get(e));
      g->second = sum;
    }
  }
  for (const auto& [param, gname] : net.gradient()) {
    auto g = grads.find(param);
    r.gradients[gname] = g != grads.end() ? g->second : Tensor(net.desc(param));
  }
  return r;
}

}  // namespace d5::test
