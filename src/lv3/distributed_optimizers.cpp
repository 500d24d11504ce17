// The shipped distributed schemes (include/deep500/dist/distributed_optimizers.h).
#include "deep500/dist/distributed_optimizers.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/ranges.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

// The elements of a list of tensors: the size of its pack_f32 vector, without copying it.
size_t elements(const std::vector<Tensor>& tensors) {
  size_t n = 0;
  for (const auto& t : tensors) n += static_cast<size_t>(t.numel());
  return n;
}

}  // namespace

ConsistentDecentralized::ConsistentDecentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm,
                                                 Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)),
      buckets_(static_cast<int64_t>(std::llround(o.bucket_mb * (1 << 20))), false,
               static_cast<int64_t>(std::llround(o.fuse_kb * 1024))),
      overlap_enabled_(o.overlap) {
  D5_CHECK_ARG(o.bucket_mb >= 0 && std::isfinite(o.bucket_mb), "--bucket-mb must be >= 0, not {}", o.bucket_mb);
  D5_CHECK_ARG(o.fuse_kb >= 0 && std::isfinite(o.fuse_kb), "--fuse-kb must be >= 0, not {}", o.fuse_kb);
  set_hook([this](Network& n) {
    if (overlap_) {
      overlap_->complete(n);
      return;
    }
    std::vector<Tensor> grads = gradient_tensors(n);
    buckets_.allreduce(*comm_, grads, ReduceOp::mean);
  });
}

ConsistentDecentralized::~ConsistentDecentralized() {
  if (overlap_) overlap_->detach();
}

TensorMap ConsistentDecentralized::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                                    const std::string& loss) {
  // Overlap keeps the gradients backward events report; an executor whose event tensors do not
  // outlive the event (torch) has every gradient reduced after backprop instead.
  if (overlap_enabled_ && overlap_executor_ != &executor) {
    if (overlap_) overlap_->detach();
    overlap_.reset();
    if (executor.backward_event_tensors_persist()) {
      overlap_ = std::make_shared<OverlappedAllreduce>(comm_, executor.network(), buckets_.policy());
      executor.add_event(overlap_);
    }
    overlap_executor_ = &executor;
  }
  return inner_step_with_hook(executor, feeds, loss);
}

ConsistentCentralized::ConsistentCentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm,
                                             Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)), root_(o.root) {
  D5_CHECK_ARG(root_ >= 0 && root_ < comm_->size(), "parameter server rank {} does not exist (ranks 0..{})", root_,
               comm_->size() - 1);
  (void)three_step();
}

TensorMap ConsistentCentralized::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                                  const std::string& loss) {
  ThreeStepOptimizer& opt = three_step();
  Network& net = executor.network();
  TensorMap out = forward_backward(executor, feeds, loss);
  std::vector<Tensor> grads = gradient_tensors(net);
  const std::vector<float> mine = pack_f32(grads, &comm_->volume());
  const auto n = static_cast<int64_t>(mine.size());
  const bool server = comm_->rank() == root_;
  std::vector<float> all(server ? mine.size() * static_cast<size_t>(comm_->size()) : 0);
  comm_->gather(mine.data(), n, DType::f32, all.data(), root_);
  std::vector<Tensor> params = parameter_tensors(net);
  std::vector<float> flat_params;
  if (server) {
    // The mean in rank order, as a sum reduction then a division (what allreduce(mean) computes).
    std::vector<float> mean(all.begin(), all.begin() + n);
    for (int r = 1; r < comm_->size(); ++r) {
      const float* g = all.data() + static_cast<size_t>(r) * mine.size();
      for (int64_t i = 0; i < n; ++i) mean[static_cast<size_t>(i)] += g[i];
    }
    divide_in_place(mean.data(), n, DType::f32, comm_->size());
    unpack_f32(mean, grads, &comm_->volume());
    apply_update_rules(opt, net);
    count_inner_step();
    flat_params = pack_f32(params, &comm_->volume());
  } else {
    flat_params.resize(elements(params));
  }
  comm_->broadcast(std::span<float>(flat_params), root_);
  if (!server) unpack_f32(flat_params, params, &comm_->volume());
  return out;
}

namespace {
constexpr int kPushTag = 0x5051, kPullTag = 0x5052;
}  // namespace

InconsistentCentralized::InconsistentCentralized(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm,
                                                 Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)), fixed_order_(o.fixed_order) {
  (void)three_step();
}

TensorMap InconsistentCentralized::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                                    const std::string& loss) {
  Network& net = executor.network();
  TensorMap out = forward_backward(executor, feeds, loss);
  std::vector<Tensor> grads = gradient_tensors(net);
  std::vector<Tensor> params = parameter_tensors(net);
  if (comm_->rank() == 0) {
    ThreeStepOptimizer& opt = three_step();
    apply_update_rules(opt, net);
    count_inner_step();
    std::vector<float> pushed(elements(grads));
    for (int served = 0; served < comm_->size() - 1; ++served) {
      const auto count = static_cast<int64_t>(pushed.size());
      int worker = served + 1;
      if (fixed_order_) {
        comm_->recv(pushed.data(), count, DType::f32, worker, kPushTag);
      } else {
        worker = comm_->recv_any(pushed.data(), count, DType::f32, kPushTag);
      }
      unpack_f32(pushed, grads, &comm_->volume());
      apply_update_rules(opt, net);
      count_inner_step();
      const std::vector<float> now = pack_f32(params, &comm_->volume());
      comm_->send(now.data(), static_cast<int64_t>(now.size()), DType::f32, worker, kPullTag);
    }
  } else {
    const std::vector<float> mine = pack_f32(grads, &comm_->volume());
    comm_->send(mine.data(), static_cast<int64_t>(mine.size()), DType::f32, 0, kPushTag);
    std::vector<float> fresh(elements(params));
    comm_->recv(fresh.data(), static_cast<int64_t>(fresh.size()), DType::f32, 0, kPullTag);
    unpack_f32(fresh, params, &comm_->volume());
  }
  return out;
}

void InconsistentCentralized::finish(Network& network) {
  std::vector<Tensor> params = parameter_tensors(network);
  std::vector<float> flat = pack_f32(params, &comm_->volume());
  comm_->broadcast(std::span<float>(flat), 0);
  unpack_f32(flat, params, &comm_->volume());
}

StaleSynchronous::StaleSynchronous(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm,
                                   Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)), staleness_(o.staleness) {
  D5_CHECK_ARG(staleness_ >= 0, "--staleness must be >= 0, not {}", staleness_);
  (void)three_step();
}

void StaleSynchronous::apply_oldest(Network& network) {
  Pending& p = *pending_.front();
  p.request->wait();
  std::vector<Tensor> grads = gradient_tensors(network);
  unpack_f32(p.gradient, grads, &comm_->volume());
  apply_update_rules(three_step(), network);
  count_inner_step();
  pending_.pop_front();
}

TensorMap StaleSynchronous::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                             const std::string& loss) {
  Network& net = executor.network();
  TensorMap out = forward_backward(executor, feeds, loss);
  auto p = std::make_unique<Pending>();
  p->gradient = pack_f32(gradient_tensors(net), &comm_->volume());
  p->request = comm_->iallreduce(p->gradient.data(), static_cast<int64_t>(p->gradient.size()), DType::f32,
                                 ReduceOp::mean);
  pending_.push_back(std::move(p));
  while (static_cast<int64_t>(pending_.size()) > staleness_) apply_oldest(net);
  return out;
}

void StaleSynchronous::finish(Network& network) {
  while (!pending_.empty()) apply_oldest(network);
}

ModelAverage::ModelAverage(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)), every_(o.average_every) {
  D5_CHECK_ARG(every_ >= 1, "--avg-every must be >= 1, not {}", every_);
}

TensorMap ModelAverage::distributed_step(GraphExecutor& executor, const TensorMap& feeds, const std::string& loss) {
  TensorMap out = inner_->step(executor, feeds, loss);
  if (++since_average_ == every_) finish(executor.network());
  return out;
}

void ModelAverage::finish(Network& network) {
  if (since_average_ == 0) return;
  std::vector<Tensor> params = parameter_tensors(network);
  buckets_.allreduce(*comm_, params, ReduceOp::mean);
  since_average_ = 0;
}

ConsistentNeighbors::ConsistentNeighbors(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm)
    : DistributedOptimizer(std::move(inner), std::move(comm)) {}

TensorMap ConsistentNeighbors::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                                const std::string& loss) {
  TensorMap out = inner_->step(executor, feeds, loss);
  std::set<int> distinct;
  for (int n : comm_->ring_neighbours()) {
    if (n != comm_->rank()) distinct.insert(n);
  }
  if (distinct.empty()) return out;
  const std::vector<int> neighbours(distinct.begin(), distinct.end());
  std::vector<Tensor> params = parameter_tensors(executor.network());
  std::vector<float> mine = pack_f32(params, &comm_->volume());
  std::vector<float> theirs(mine.size() * neighbours.size());
  comm_->neighbor_exchange(neighbours, mine.data(), static_cast<int64_t>(mine.size()), DType::f32, theirs.data());
  const auto w = static_cast<float>(neighbours.size() + 1);
  for (size_t i = 0; i < mine.size(); ++i) {
    float s = mine[i];
    for (size_t k = 0; k < neighbours.size(); ++k) s += theirs[k * mine.size() + i];
    mine[i] = s / w;
  }
  unpack_f32(mine, params, &comm_->volume());
  return out;
}

SparseAllreduce::SparseAllreduce(std::unique_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm, Options o)
    : DistributedOptimizer(std::move(inner), std::move(comm)), topk_(o.topk) {
  D5_CHECK_ARG(topk_ > 0 && topk_ <= 1, "--topk is the fraction of gradient elements sent, in (0, 1], not {}",
               topk_);
  set_hook([this](Network& n) { reduce(n); });
}

TensorMap SparseAllreduce::distributed_step(GraphExecutor& executor, const TensorMap& feeds,
                                            const std::string& loss) {
  return inner_step_with_hook(executor, feeds, loss);
}

void SparseAllreduce::reduce(Network& network) {
  std::vector<Tensor> grads = gradient_tensors(network);
  std::vector<float> acc = pack_f32(grads, &comm_->volume());
  if (residual_.size() != acc.size()) residual_.assign(acc.size(), 0.f);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += residual_[i];
  const auto total = static_cast<int64_t>(acc.size());
  const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(topk_ * static_cast<double>(total))), 1, total);
  // The k largest magnitudes; ties go to the lower index so every run selects the same set.
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::iota(index.begin(), index.end(), int64_t{0});
  auto larger = [&acc](int64_t a, int64_t b) {
    const float x = std::fabs(acc[static_cast<size_t>(a)]), y = std::fabs(acc[static_cast<size_t>(b)]);
    return x > y || (x == y && a < b);
  };
  if (k < total) std::nth_element(index.begin(), index.begin() + k, index.end(), larger);
  index.resize(static_cast<size_t>(k));
  std::sort(index.begin(), index.end());
  std::vector<float> values(static_cast<size_t>(k));
  residual_ = acc;
  for (size_t j = 0; j < index.size(); ++j) {
    values[j] = acc[static_cast<size_t>(index[j])];
    residual_[static_cast<size_t>(index[j])] = 0.f;
  }
  std::vector<int64_t> counts(static_cast<size_t>(comm_->size()));
  comm_->allgather(&k, 1, DType::i64, counts.data());
  const int64_t received = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<float> dense(acc.size(), 0.f);
  // SparCML's switch to a dense representation: once the gathered (index, value) pairs would
  // outweigh the dense vector, a dense allreduce of the scattered values carries fewer bytes. Every
  // rank knows every count, so all take the same branch.
  constexpr int64_t kPairBytes = sizeof(int64_t) + sizeof(float);
  if (received * kPairBytes >= total * static_cast<int64_t>(sizeof(float))) {
    ++dense_steps_;
    for (size_t j = 0; j < index.size(); ++j) dense[static_cast<size_t>(index[j])] = values[j];
    comm_->allreduce(dense.data(), total, DType::f32, ReduceOp::mean);
    unpack_f32(dense, grads, &comm_->volume());
    return;
  }
  std::vector<int64_t> all_index(static_cast<size_t>(received));
  std::vector<float> all_values(static_cast<size_t>(received));
  comm_->allgatherv(index.data(), k, DType::i64, all_index.data(), counts);
  comm_->allgatherv(values.data(), k, DType::f32, all_values.data(), counts);
  for (size_t j = 0; j < all_index.size(); ++j) dense[static_cast<size_t>(all_index[j])] += all_values[j];
  divide_in_place(dense.data(), total, DType::f32, comm_->size());
  unpack_f32(dense, grads, &comm_->volume());
}

}  // namespace d5
