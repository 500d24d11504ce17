// Bucketed allreduce of a list of tensors (include/deep500/dist/gradient_buckets.h).
#include "deep500/dist/gradient_buckets.h"

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/dist/host_staging.h"

namespace d5 {

bool packable(const Communicator& comm, const Tensor& t) {
  return host_accessible(t.device()) || !comm.reaches(t.device());
}

void TensorBuckets::plan(const Communicator& comm, const std::vector<Tensor>& tensors) {
  std::vector<std::pair<size_t, bool>> key;
  for (const auto& t : tensors) key.emplace_back(t.bytes(), packable(comm, t));
  if (!plan_.empty() && key == planned_) return;
  planned_ = key;
  plan_.clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    D5_CHECK_ARG(t.dtype() == DType::f32 || t.dtype() == DType::f64,
                 "distributed reduction of {} tensors is not supported (f32 and f64 are)", to_string(t.dtype()));
    const auto bytes = static_cast<int64_t>(t.bytes());
    const bool packed = key[i].second;
    const bool joins = !plan_.empty() && plan_.back().fusable && plan_.back().dtype == t.dtype() &&
                       plan_.back().packed == packed && policy_.joins(plan_.back().bytes, bytes);
    if (joins) {
      plan_.back().last = i + 1;
      plan_.back().bytes += bytes;
    } else {
      plan_.push_back({i, i + 1, t.dtype(), bytes, policy_.fusable(bytes), packed});
    }
  }
  buffers_.assign(plan_.size(), {});
}

void TensorBuckets::allreduce(Communicator& comm, std::vector<Tensor>& tensors, ReduceOp op) {
  plan(comm, tensors);
  CommunicationVolume* volume = &comm.volume();
  // A bucket of one tensor the communicator reaches is reduced where it is, and a bucket of several
  // on its device as one grouped call; any other through its host buffer: packed (fused tensors),
  // staged (a tensor on a device the communicator cannot reach), or both.
  auto in_place = [&](const Bucket& k) { return k.last - k.first == 1 && comm.reaches(tensors[k.first].device()); };
  auto grouped = [&](const Bucket& k) { return !k.packed && k.last - k.first > 1; };
  auto unpack = [&](size_t b) {
    if (in_place(plan_[b]) || grouped(plan_[b])) return;
    const std::byte* p = buffers_[b].data();
    for (size_t i = plan_[b].first; i < plan_[b].last; ++i) {
      copy_from_host_memory(p, tensors[i], volume);
      p += tensors[i].bytes();
    }
  };
  std::vector<CommRequestPtr> requests(plan_.size());
  for (size_t b = 0; b < plan_.size(); ++b) {
    const Bucket& k = plan_[b];
    const int64_t count = k.bytes / static_cast<int64_t>(dtype_size(k.dtype));
    if (grouped(k)) {
      std::vector<void*> data;
      std::vector<int64_t> counts;
      for (size_t i = k.first; i < k.last; ++i) {
        data.push_back(tensors[i].data());
        counts.push_back(tensors[i].numel());
      }
      requests[b] = comm.iallreduce_group(data, counts, k.dtype, op);
      if (!nonblocking_) requests[b]->wait();
      continue;
    }
    void* data = tensors[k.first].data();
    if (!in_place(k)) {
      buffers_[b].resize(static_cast<size_t>(k.bytes));
      std::byte* p = buffers_[b].data();
      for (size_t i = k.first; i < k.last; ++i) {
        copy_to_host_memory(tensors[i], p, volume);
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

std::vector<float> pack_f32(const std::vector<Tensor>& tensors, CommunicationVolume* staging) {
  size_t n = 0;
  for (const auto& t : tensors) {
    D5_CHECK_ARG(t.dtype() == DType::f32, "this distributed scheme exchanges f32 tensors, not {}", to_string(t.dtype()));
    n += static_cast<size_t>(t.numel());
  }
  std::vector<float> flat(n);
  auto* p = reinterpret_cast<std::byte*>(flat.data());
  for (const auto& t : tensors) {
    copy_to_host_memory(t, p, staging);
    p += t.bytes();
  }
  return flat;
}

void unpack_f32(const std::vector<float>& flat, std::vector<Tensor>& tensors, CommunicationVolume* staging) {
  size_t at = 0;
  for (auto& t : tensors) {
    const auto n = static_cast<size_t>(t.numel());
    D5_CHECK(t.dtype() == DType::f32 && at + n <= flat.size(), Internal, "unpack: {} values for more f32 tensors",
             flat.size());
    copy_from_host_memory(reinterpret_cast<const std::byte*>(flat.data() + at), t, staging);
    at += n;
  }
  D5_CHECK(at == flat.size(), Internal, "unpack: {} values for {} tensor elements", flat.size(), at);
}

}  // namespace d5
