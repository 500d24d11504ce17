// Gradient allreduce overlapped with backprop (include/deep500/dist/gradient_overlap.h).
#include "deep500/dist/gradient_overlap.h"

#include "deep500/core/error.h"
#include "deep500/dist/host_staging.h"

namespace d5 {

OverlappedAllreduce::OverlappedAllreduce(std::shared_ptr<Communicator> comm, const Network& network,
                                         const BucketPolicy& policy)
    : comm_(std::move(comm)), policy_(policy), rest_(policy.bucket_bytes, false, policy.fuse_below_bytes) {
  std::map<std::string, int> readers;
  for (const Node& node : network.nodes()) {
    for (const auto& in : node.inputs) {
      if (!in.empty() && network.is_param(in)) ++readers[in];
    }
  }
  for (const auto& [param, n] : readers) {
    if (n == 1 && network.fetch_tensor(param).dtype() == DType::f32) single_use_.insert(param);
  }
}

void OverlappedAllreduce::before_executor(const TensorMap& /*feeds*/) {
  if (!comm_ || !planned_) return;
  ready_.clear();
  for (auto& b : buckets_) {
    b.ready = 0;
    b.request.reset();
    b.in_place = Tensor();
    b.grouped.clear();
  }
  next_to_start_ = 0;
  started_early_ = 0;
}

bool OverlappedAllreduce::after_operator(const Node& node, Pass pass, std::span<const Tensor> outputs) {
  if (!comm_ || pass != Pass::backward) return true;
  for (size_t i = 0; i < node.inputs.size() && i < outputs.size(); ++i) {
    const std::string& name = node.inputs[i];
    if (!outputs[i].defined() || !single_use_.count(name)) continue;
    if (!planned_) {
      ready_order_.push_back(name);
      continue;
    }
    auto it = bucket_of_.find(name);
    if (it == bucket_of_.end() || ready_.count(name)) continue;
    ready_[name] = outputs[i];
    ++buckets_[it->second].ready;
  }
  if (!planned_) return true;
  const size_t before = next_to_start_;
  start_ready_buckets();
  started_early_ += next_to_start_ - before;
  // MPI moves a nonblocking collective forward only inside its calls.
  for (size_t b = 0; b < next_to_start_; ++b) {
    if (buckets_[b].request) buckets_[b].request->test();
  }
  return true;
}

void OverlappedAllreduce::start_ready_buckets() {
  // In plan order only: every rank must start the collectives in the same order.
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].ready == buckets_[next_to_start_].params.size()) {
    std::vector<Tensor> tensors;
    for (const auto& p : buckets_[next_to_start_].params) tensors.push_back(ready_.at(p));
    start(next_to_start_++, tensors);
  }
}

void OverlappedAllreduce::start(size_t b, const std::vector<Tensor>& tensors) {
  Bucket& k = buckets_[b];
  const int64_t count = k.bytes / static_cast<int64_t>(sizeof(float));
  if (tensors.size() == 1) {
    // Staged through the host when the communicator does not reach the gradient's device.
    k.in_place = tensors[0];
    k.request = comm_->iallreduce(k.in_place, ReduceOp::mean);
    return;
  }
  if (!k.packed) {
    k.grouped = tensors;
    std::vector<void*> data;
    std::vector<int64_t> counts;
    for (Tensor& t : k.grouped) {
      data.push_back(t.data());
      counts.push_back(t.numel());
    }
    k.request = comm_->iallreduce_group(data, counts, DType::f32, ReduceOp::mean);
    return;
  }
  std::byte* p = k.buffer.data();
  for (const auto& t : tensors) {
    copy_to_host_memory(t, p, &comm_->volume());
    p += t.bytes();
  }
  k.request = comm_->iallreduce(k.buffer.data(), count, DType::f32, ReduceOp::mean);
}

void OverlappedAllreduce::plan() {
  // Consecutive small gradients in the order they became ready, as TensorBuckets fuses them.
  std::set<std::string> seen;
  for (const auto& name : ready_order_) {
    if (!seen.insert(name).second) continue;
    const auto bytes = static_cast<int64_t>(ready_.count(name) ? ready_.at(name).bytes() : 0);
    // Gradients on a device the communicator reaches are grouped where they lie, never packed.
    const bool packed = !ready_.count(name) || packable(*comm_, ready_.at(name));
    const bool joins = !buckets_.empty() && buckets_.back().fusable && buckets_.back().packed == packed &&
                       policy_.joins(buckets_.back().bytes, bytes);
    if (!joins) {
      buckets_.emplace_back();
      buckets_.back().fusable = policy_.fusable(bytes);
      buckets_.back().packed = packed;
    }
    buckets_.back().params.push_back(name);
    buckets_.back().bytes += bytes;
    bucket_of_[name] = buckets_.size() - 1;
  }
  for (auto& b : buckets_) {
    if (b.params.size() > 1 && b.packed) b.buffer.resize(static_cast<size_t>(b.bytes));
  }
  planned_ = true;
}

void OverlappedAllreduce::complete(Network& network) {
  D5_CHECK(comm_ != nullptr, Internal, "overlapped allreduce used after its optimizer was destroyed");
  if (!planned_) {
    // First step: learn the order, reduce everything after backprop.
    std::vector<Tensor> all = gradient_tensors(network);
    rest_.allreduce(*comm_, all, ReduceOp::mean);
    for (const auto& name : ready_order_) ready_[name] = network.fetch_tensor(Network::gradient_name(name));
    plan();
    ready_.clear();
    return;
  }
  auto grad_of = [&](const std::string& p) { return network.fetch_tensor(Network::gradient_name(p)); };
  // Buckets whose gradients the events did not all report start now, in plan order.
  for (size_t b = next_to_start_; b < buckets_.size(); ++b) {
    std::vector<Tensor> tensors;
    for (const auto& p : buckets_[b].params) tensors.push_back(grad_of(p));
    start(b, tensors);
  }
  next_to_start_ = buckets_.size();
  for (auto& k : buckets_) {
    k.request->wait();
    if (k.params.size() == 1) {
      Tensor g = grad_of(k.params[0]);
      if (g.data() != k.in_place.data()) g.copy_from(k.in_place);
      continue;
    }
    if (!k.packed) {
      for (size_t i = 0; i < k.params.size(); ++i) {
        Tensor g = grad_of(k.params[i]);
        if (g.data() != k.grouped[i].data()) g.copy_from(k.grouped[i]);
      }
      continue;
    }
    const std::byte* p = k.buffer.data();
    for (const auto& name : k.params) {
      Tensor g = grad_of(name);
      copy_from_host_memory(p, g, &comm_->volume());
      p += g.bytes();
    }
  }
  std::vector<Tensor> rest;
  for (const auto& [param, grad] : network.gradient()) {
    if (!bucket_of_.count(param) && network.has_value(grad)) rest.push_back(network.fetch_tensor(grad));
  }
  rest_.allreduce(*comm_, rest, ReduceOp::mean);
}

}  // namespace d5
