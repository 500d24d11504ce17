// Bucketed allreduce of a list of tensors (include/deep500/dist/gradient_buckets.h).
#include "deep500/dist/gradient_buckets.h"

#include <algorithm>
#include <cstring>

#include "deep500/core/error.h"

namespace d5 {

void TensorBuckets::plan(const std::vector<Tensor>& tensors) {
  std::vector<size_t> sizes;
  for (const auto& t : tensors) sizes.push_back(t.bytes());
  if (!plan_.empty() && sizes == planned_bytes_) return;
  planned_bytes_ = sizes;
  plan_.clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    D5_CHECK_ARG(t.dtype() == DType::f32 || t.dtype() == DType::f64,
                 "distributed reduction of {} tensors is not supported (f32 and f64 are)", to_string(t.dtype()));
    const auto bytes = static_cast<int64_t>(t.bytes());
    const bool fusable = policy_.fusable(bytes);
    const bool joins = !plan_.empty() && plan_.back().fusable && plan_.back().dtype == t.dtype() &&
                       policy_.joins(plan_.back().bytes, bytes);
    if (joins) {
      plan_.back().last = i + 1;
      plan_.back().bytes += bytes;
    } else {
      plan_.push_back({i, i + 1, t.dtype(), bytes, fusable});
    }
  }
  buffers_.assign(plan_.size(), {});
  for (size_t b = 0; b < plan_.size(); ++b) {
    if (plan_[b].last - plan_[b].first > 1) buffers_[b].resize(static_cast<size_t>(plan_[b].bytes));
  }
}

void TensorBuckets::allreduce(Communicator& comm, std::vector<Tensor>& tensors, ReduceOp op) {
  plan(tensors);
  std::vector<CommRequestPtr> requests(plan_.size());
  auto unpack = [&](size_t b) {
    const Bucket& k = plan_[b];
    if (k.last - k.first == 1) return;
    const std::byte* p = buffers_[b].data();
    for (size_t i = k.first; i < k.last; ++i) {
      std::memcpy(tensors[i].data(), p, tensors[i].bytes());
      p += tensors[i].bytes();
    }
  };
  for (size_t b = 0; b < plan_.size(); ++b) {
    const Bucket& k = plan_[b];
    const int64_t count = k.bytes / static_cast<int64_t>(dtype_size(k.dtype));
    void* data = tensors[k.first].data();
    if (k.last - k.first > 1) {
      std::byte* p = buffers_[b].data();
      for (size_t i = k.first; i < k.last; ++i) {
        std::memcpy(p, tensors[i].data(), tensors[i].bytes());
        p += tensors[i].bytes();
      }
      data = buffers_[b].data();
    }
    if (nonblocking_) {
      requests[b] = comm.iallreduce(data, count, k.dtype, op);
    } else {
      comm.allreduce(data, count, k.dtype, op);
      unpack(b);
    }
  }
  if (!nonblocking_) return;
  for (size_t b = 0; b < plan_.size(); ++b) {
    requests[b]->wait();
    unpack(b);
  }
}

int64_t TensorBuckets::bytes() const {
  int64_t s = 0;
  for (const auto& b : plan_) s += b.bytes;
  return s;
}

std::vector<Tensor> gradient_tensors(const Network& network) {
  std::vector<Tensor> out;
  for (const auto& [param, grad] : network.gradient()) {
    if (network.has_value(grad)) out.push_back(network.fetch_tensor(grad));
  }
  return out;
}

std::vector<Tensor> parameter_tensors(const Network& network) {
  std::vector<Tensor> out;
  for (const auto& [param, grad] : network.gradient()) out.push_back(network.fetch_tensor(param));
  return out;
}

std::vector<float> pack_f32(const std::vector<Tensor>& tensors) {
  size_t n = 0;
  for (const auto& t : tensors) {
    D5_CHECK_ARG(t.dtype() == DType::f32, "this distributed scheme exchanges f32 tensors, not {}", to_string(t.dtype()));
    n += static_cast<size_t>(t.numel());
  }
  std::vector<float> flat;
  flat.reserve(n);
  for (const auto& t : tensors) {
    const auto s = t.span<float>();
    flat.insert(flat.end(), s.begin(), s.end());
  }
  return flat;
}

void unpack_f32(const std::vector<float>& flat, std::vector<Tensor>& tensors) {
  size_t at = 0;
  for (auto& t : tensors) {
    auto s = t.span<float>();
    D5_CHECK(at + s.size() <= flat.size(), Internal, "unpack: {} values for more tensors", flat.size());
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(at), flat.begin() + static_cast<std::ptrdiff_t>(at + s.size()),
              s.begin());
    at += s.size();
  }
  D5_CHECK(at == flat.size(), Internal, "unpack: {} values for {} tensor elements", flat.size(), at);
}

}  // namespace d5
