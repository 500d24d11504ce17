#include "deep500/train/divergence.h"

#include <cmath>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"

namespace d5 {

namespace {

double loss_of(const TensorMap& outputs, const std::string& loss) {
  auto it = outputs.find(loss);
  D5_CHECK_ARG(it != outputs.end() && it->second.numel() == 1, "divergence: the step returned no scalar loss '{}'",
               loss);
  return it->second.get(0);
}

}  // namespace

DivergenceReport trajectory_divergence(const NetworkBuilder& build, const BatchSource& batches,
                                       const DivergenceOptions& o) {
  D5_CHECK_ARG(o.steps >= 1, "divergence: steps must be >= 1, not {}", o.steps);
  auto opt_a = make_optimizer(o.optimizer, o.hyper);
  auto opt_b = make_optimizer(o.twin, o.hyper);
  if (o.schedule) {
    opt_a->set_schedule(o.schedule);
    opt_b->set_schedule(o.schedule);
  }
  Network net_a = build(), net_b = build();
  const std::vector<std::string> params = net_a.get_params();
  D5_CHECK_ARG(!params.empty(), "divergence: network '{}' has no parameters to train", net_a.name());
  D5_CHECK_ARG(net_b.get_params() == params, "divergence: the network builder made two different networks");
  ExecutorOptions eo;
  eo.deterministic = true;
  auto exec_a = make_executor(net_a, o.backend, eo);
  auto exec_b = make_executor(net_b, o.backend, eo);

  DivergenceReport r;
  r.optimizer = o.optimizer;
  r.twin = o.twin;
  r.backend = o.backend;
  for (const auto& p : params) r.parameters += net_a.fetch_tensor(p).numel();
  for (int64_t s = 0; s < o.steps; ++s) {
    const TensorMap feeds = batches(s);
    DivergenceStep st;
    st.step = s + 1;
    st.loss_a = loss_of(opt_a->step(*exec_a, feeds, o.loss), o.loss);
    st.loss_b = loss_of(opt_b->step(*exec_b, feeds, o.loss), o.loss);
    double total_sq = 0;
    for (const auto& p : params) {
      const Tensor a = net_a.fetch_tensor(p), b = net_b.fetch_tensor(p);
      double sq = 0, mx = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        const double d = a.get(i) - b.get(i);
        sq += d * d;
        mx = std::max(mx, std::abs(d));
      }
      st.params[p] = {std::sqrt(sq), mx};
      total_sq += sq;
      st.total.linf = std::max(st.total.linf, mx);
    }
    st.total.l2 = std::sqrt(total_sq);
    r.steps.push_back(std::move(st));
  }
  return r;
}

BatchSource random_batches(const Network& network, uint64_t seed, int64_t classes) {
  network.infer();
  std::vector<std::pair<std::string, TensorDesc>> inputs;
  for (const auto& name : network.inputs()) inputs.emplace_back(name, network.desc(name));
  return [inputs, seed, classes](int64_t step) {
    TensorMap feeds;
    for (const auto& [name, desc] : inputs) {
      RngStream rng(seed, fmt::format("divergence/step{}/{}", step, name));
      Tensor t(TensorDesc{desc.dtype, desc.shape, Layout::any});
      if (is_floating(desc.dtype)) {
        for (int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.normal());
      } else {
        D5_CHECK_ARG(classes > 0, "divergence: input '{}' is {}; integer inputs need a class count", name,
                     desc.to_string());
        for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(rng.below(static_cast<uint64_t>(classes))));
      }
      feeds[name] = std::move(t);
    }
    return feeds;
  };
}

BatchSource dataset_batches(std::shared_ptr<const Dataset> dataset, int64_t batch) {
  D5_CHECK_ARG(dataset && dataset->size() > 0, "divergence: the dataset is empty");
  D5_CHECK_ARG(batch > 0, "divergence: the batch size must be > 0, not {}", batch);
  return [dataset, batch](int64_t step) {
    std::vector<int64_t> indices(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) indices[static_cast<size_t>(i)] = (step * batch + i) % dataset->size();
    const Batch b = dataset->fetch(indices);
    return TensorMap(b.begin(), b.end());
  };
}

}  // namespace d5
