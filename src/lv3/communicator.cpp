// Communicator: argument checks, timing and volume accounting around the implementation's hooks
// (include/deep500/dist/communicator.h).
#include "deep500/dist/communicator.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "deep500/core/device_allocator.h"
#include "deep500/core/error.h"
#include "deep500/dist/host_staging.h"

namespace d5 {

namespace {

constexpr int kNeighbourTag = 0x5e1;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t payload(int64_t count, DType dtype) { return count * static_cast<int64_t>(dtype_size(dtype)); }

void check_count(int64_t count, const char* what) {
  D5_CHECK_ARG(count >= 0, "{}: element count must be >= 0, not {}", what, count);
}

// Times a blocking collective and records it under `op`.
template <typename F>
void timed_collective(CommunicationVolume& v, const char* op, int64_t bytes, bool on_device, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const double s = seconds_since(t0);
  v.record_collective(op, bytes, s, on_device);
  v.add_time(s);
}

// Divides after the sum completes: a nonblocking mean.
class MeanRequest : public CommRequest {
 public:
  MeanRequest(CommRequestPtr sum, std::function<void()> divide) : sum_(std::move(sum)), divide_(std::move(divide)) {}

 protected:
  void do_wait() override {
    sum_->wait();
    divide_();
  }
  bool do_test() override {
    if (!sum_->test()) return false;
    divide_();
    return true;
  }

 private:
  CommRequestPtr sum_;
  std::function<void()> divide_;
};

// A nonblocking reduction of a host copy; completing it copies the result back into the tensor.
class StagedRequest : public CommRequest {
 public:
  StagedRequest(CommRequestPtr inner, Tensor host, Tensor target, CommunicationVolume* volume)
      : host_(std::move(host)), target_(std::move(target)), volume_(volume), inner_(std::move(inner)) {}

 protected:
  void do_wait() override {
    inner_->wait();
    staged_from_host(host_, target_, volume_);
  }
  bool do_test() override {
    if (!inner_->test()) return false;
    staged_from_host(host_, target_, volume_);
    return true;
  }

 private:
  Tensor host_, target_;
  CommunicationVolume* volume_;
  // Last, so destroyed first: a request dropped without wait() waits for MPI to finish with
  // host_ before host_ is freed.
  CommRequestPtr inner_;
};

}  // namespace

void CommRequest::wait() {
  if (done_) return;
  const auto t0 = std::chrono::steady_clock::now();
  do_wait();
  done_ = true;
  if (volume_ != nullptr) volume_->add_time(seconds_since(t0));
}

bool CommRequest::test() {
  if (done_) return true;
  const auto t0 = std::chrono::steady_clock::now();
  done_ = do_test();
  if (volume_ != nullptr) volume_->add_time(seconds_since(t0));
  return done_;
}

void wait_all(std::vector<CommRequestPtr>& requests) {
  for (auto& r : requests) {
    if (r) r->wait();
  }
}

bool CombinedRequest::do_test() {
  bool all = true;
  for (auto& r : requests_) {
    if (r && !r->test()) all = false;
  }
  return all;
}

void divide_in_place(void* data, int64_t count, DType dtype, int ranks) {
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<float>(ranks);
      return;
    }
    case DType::f64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] /= ranks;
      return;
    }
    default:
      D5_THROW(InvalidArgument, "a mean reduction needs f32 or f64 data, not {}", to_string(dtype));
  }
}

bool Communicator::reaches(Device d) const { return host_accessible(d); }

void Communicator::do_divide(void* data, int64_t count, DType dtype, int ranks) {
  divide_in_place(data, count, dtype, ranks);
}

bool Communicator::carried_on_device(const void*) const { return false; }

bool Communicator::divides_means(const void*) const { return false; }

// Called before any rank starts the sum, so that all refuse alike.
void check_mean(ReduceOp op, DType dtype) {
  D5_CHECK_ARG(op != ReduceOp::mean || dtype == DType::f32 || dtype == DType::f64,
               "a mean reduction needs f32 or f64 data, not {}", to_string(dtype));
}

void Communicator::allreduce(Tensor& t, ReduceOp op) {
  if (reaches(t.device())) return allreduce(t.data(), t.numel(), t.dtype(), op);
  Tensor host = staged_to_host(t, &volume_);
  allreduce(host.data(), host.numel(), host.dtype(), op);
  staged_from_host(host, t, &volume_);
}

CommRequestPtr Communicator::iallreduce(Tensor& t, ReduceOp op) {
  if (reaches(t.device())) return iallreduce(t.data(), t.numel(), t.dtype(), op);
  Tensor host = staged_to_host(t, &volume_);
  CommRequestPtr r = iallreduce(host.data(), host.numel(), host.dtype(), op);
  return std::make_unique<StagedRequest>(std::move(r), std::move(host), t, &volume_);
}

void Communicator::broadcast(Tensor& t, int root) {
  if (reaches(t.device())) return broadcast(t.data(), t.numel(), t.dtype(), root);
  // Only the root's bytes are read; every other rank's are overwritten.
  Tensor host = rank() == root ? staged_to_host(t, &volume_) : Tensor::uninitialized(t.desc());
  broadcast(host.data(), host.numel(), host.dtype(), root);
  if (rank() != root) staged_from_host(host, t, &volume_);
}

void Communicator::check_peer(int peer, const char* what) const {
  D5_CHECK_ARG(peer >= 0 && peer < size(), "{}: rank {} does not exist (ranks 0..{})", what, peer, size() - 1);
}

void Communicator::record_from_root(int root, int64_t bytes) {
  // A flat tree: the root sends `bytes` to every other rank.
  for (int p = 0; p < size(); ++p) {
    if (p == root) continue;
    if (rank() == root) volume_.record_send(p, bytes);
    if (rank() == p) volume_.record_receive(root, bytes);
  }
}

CommRequestPtr Communicator::accounted(CommRequestPtr request) {
  request->attach(&volume_);
  return request;
}

void Communicator::allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  check_count(count, "allreduce");
  check_mean(op, dtype);
  const bool divide_here = op == ReduceOp::mean && !divides_means(data);
  timed_collective(volume_, "allreduce", payload(count, dtype), carried_on_device(data), [&] {
    do_allreduce(data, count, dtype, divide_here ? ReduceOp::sum : op);
    if (divide_here) do_divide(data, count, dtype, size());
  });
}

CommRequestPtr Communicator::iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  check_count(count, "iallreduce");
  check_mean(op, dtype);
  const bool divide_here = op == ReduceOp::mean && !divides_means(data);
  const auto t0 = std::chrono::steady_clock::now();
  CommRequestPtr r = do_iallreduce(data, count, dtype, divide_here ? ReduceOp::sum : op);
  if (divide_here) {
    r = std::make_unique<MeanRequest>(std::move(r), [this, data, count, dtype] { do_divide(data, count, dtype, size()); });
  }
  volume_.record_collective("iallreduce", payload(count, dtype), 0, carried_on_device(data));
  volume_.add_time(seconds_since(t0));
  return accounted(std::move(r));
}

CommRequestPtr Communicator::do_iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts,
                                                 DType dtype, ReduceOp op) {
  std::vector<CommRequestPtr> requests;
  for (size_t i = 0; i < data.size(); ++i) requests.push_back(do_iallreduce(data[i], counts[i], dtype, op));
  return std::make_unique<CombinedRequest>(std::move(requests));
}

CommRequestPtr Communicator::iallreduce_group(std::span<void* const> data, std::span<const int64_t> counts,
                                              DType dtype, ReduceOp op) {
  D5_CHECK_ARG(data.size() == counts.size(), "iallreduce_group: {} buffers and {} counts", data.size(), counts.size());
  for (int64_t c : counts) check_count(c, "iallreduce_group");
  check_mean(op, dtype);
  const bool divide_here =
      op == ReduceOp::mean && !std::all_of(data.begin(), data.end(), [&](const void* p) { return divides_means(p); });
  const auto t0 = std::chrono::steady_clock::now();
  CommRequestPtr r = do_iallreduce_group(data, counts, dtype, divide_here ? ReduceOp::sum : op);
  if (divide_here) {
    // One shared list: vectors captured by value here draw a false -Wfree-nonheap-object from g++ 12.
    auto buffers = std::make_shared<const std::vector<std::pair<void*, int64_t>>>([&] {
      std::vector<std::pair<void*, int64_t>> b;
      for (size_t i = 0; i < data.size(); ++i) b.emplace_back(data[i], counts[i]);
      return b;
    }());
    r = std::make_unique<MeanRequest>(std::move(r), [this, buffers, dtype] {
      for (const auto& [p, n] : *buffers) do_divide(p, n, dtype, size());
    });
  }
  for (size_t i = 0; i < data.size(); ++i)
    volume_.record_collective("iallreduce", payload(counts[i], dtype), 0, carried_on_device(data[i]));
  volume_.add_time(seconds_since(t0));
  return accounted(std::move(r));
}

void Communicator::broadcast(void* data, int64_t count, DType dtype, int root) {
  check_count(count, "broadcast");
  check_peer(root, "broadcast root");
  const int64_t bytes = payload(count, dtype);
  timed_collective(volume_, "broadcast", bytes, carried_on_device(data), [&] { do_broadcast(data, count, dtype, root); });
  record_from_root(root, bytes);
}

CommRequestPtr Communicator::ibroadcast(void* data, int64_t count, DType dtype, int root) {
  check_count(count, "ibroadcast");
  check_peer(root, "ibroadcast root");
  const int64_t bytes = payload(count, dtype);
  const auto t0 = std::chrono::steady_clock::now();
  CommRequestPtr r = do_ibroadcast(data, count, dtype, root);
  volume_.record_collective("ibroadcast", bytes, 0, carried_on_device(data));
  volume_.add_time(seconds_since(t0));
  record_from_root(root, bytes);
  return accounted(std::move(r));
}

void Communicator::gather(const void* send, int64_t count, DType dtype, void* recv, int root) {
  gatherv(send, count, dtype, recv, std::vector<int64_t>(static_cast<size_t>(size()), count), root);
}

void Communicator::gatherv(const void* send, int64_t count, DType dtype, void* recv,
                           const std::vector<int64_t>& counts, int root) {
  check_count(count, "gather");
  check_peer(root, "gather root");
  const bool at_root = rank() == root;
  if (at_root) {
    D5_CHECK_ARG(static_cast<int>(counts.size()) == size(), "gatherv: {} counts for {} ranks", counts.size(), size());
    D5_CHECK_ARG(counts[static_cast<size_t>(root)] == count, "gatherv: the root sends {} elements, counts say {}",
                 count, counts[static_cast<size_t>(root)]);
  }
  const int64_t total = at_root ? std::accumulate(counts.begin(), counts.end(), int64_t{0}) : count;
  timed_collective(volume_, "gather", payload(total, dtype), false, [&] { do_gatherv(send, count, dtype, recv, counts, root); });
  if (at_root) {
    for (int p = 0; p < size(); ++p) {
      if (p != root) volume_.record_receive(p, payload(counts[static_cast<size_t>(p)], dtype));
    }
  } else {
    volume_.record_send(root, payload(count, dtype));
  }
}

void Communicator::allgather(const void* send, int64_t count, DType dtype, void* recv) {
  allgatherv(send, count, dtype, recv, std::vector<int64_t>(static_cast<size_t>(size()), count));
}

void Communicator::allgatherv(const void* send, int64_t count, DType dtype, void* recv,
                              const std::vector<int64_t>& counts) {
  check_count(count, "allgather");
  D5_CHECK_ARG(static_cast<int>(counts.size()) == size(), "allgatherv: {} counts for {} ranks", counts.size(), size());
  D5_CHECK_ARG(counts[static_cast<size_t>(rank())] == count, "allgatherv: rank {} sends {} elements, counts say {}",
               rank(), count, counts[static_cast<size_t>(rank())]);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  timed_collective(volume_, "allgather", payload(total, dtype), false,
                   [&] { do_allgatherv(send, count, dtype, recv, counts); });
}

void Communicator::scatter(const void* send, int64_t count, DType dtype, void* recv, int root) {
  check_count(count, "scatter");
  check_peer(root, "scatter root");
  const int64_t bytes = payload(count, dtype);
  timed_collective(volume_, "scatter", bytes * size(), false, [&] { do_scatter(send, count, dtype, recv, root); });
  record_from_root(root, bytes);
}

void Communicator::barrier() {
  timed_collective(volume_, "barrier", 0, false, [&] { do_barrier(); });
}

void Communicator::send(const void* data, int64_t count, DType dtype, int peer, int tag) {
  isend(data, count, dtype, peer, tag)->wait();
}

void Communicator::recv(void* data, int64_t count, DType dtype, int peer, int tag) {
  irecv(data, count, dtype, peer, tag)->wait();
}

int Communicator::recv_any(void* data, int64_t count, DType dtype, int tag) {
  check_count(count, "recv_any");
  const auto t0 = std::chrono::steady_clock::now();
  const int source = do_recv_any(data, count, dtype, tag);
  volume_.record_receive(source, payload(count, dtype));
  volume_.add_time(seconds_since(t0));
  return source;
}

CommRequestPtr Communicator::isend(const void* data, int64_t count, DType dtype, int peer, int tag) {
  return point_to_point("send", count, dtype, peer, [&] { return do_isend(data, count, dtype, peer, tag); });
}

CommRequestPtr Communicator::irecv(void* data, int64_t count, DType dtype, int peer, int tag) {
  return point_to_point("recv", count, dtype, peer, [&] { return do_irecv(data, count, dtype, peer, tag); });
}

CommRequestPtr Communicator::point_to_point(const char* what, int64_t count, DType dtype, int peer,
                                            const std::function<CommRequestPtr()>& start) {
  check_count(count, what);
  check_peer(peer, what);
  const auto t0 = std::chrono::steady_clock::now();
  CommRequestPtr r = start();
  if (what[0] == 's') {
    volume_.record_send(peer, payload(count, dtype));
  } else {
    volume_.record_receive(peer, payload(count, dtype));
  }
  volume_.add_time(seconds_since(t0));
  return accounted(std::move(r));
}

void Communicator::sendrecv(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                            int source, DType dtype, int tag) {
  std::vector<CommRequestPtr> rs;
  rs.push_back(irecv(recv, recv_count, dtype, source, tag));
  rs.push_back(isend(send, send_count, dtype, dest, tag));
  wait_all(rs);
}

void Communicator::neighbor_exchange(const std::vector<int>& neighbours, const void* send, int64_t count,
                                     DType dtype, void* recv) {
  // Every message carries the same buffer, so when a rank is listed twice (a ring of two, where
  // left and right are one rank) it does not matter which of its two messages lands in which slot.
  std::vector<CommRequestPtr> rs;
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  for (size_t i = 0; i < neighbours.size(); ++i) {
    rs.push_back(irecv(static_cast<char*>(recv) + static_cast<int64_t>(i) * count * elem, count, dtype,
                       neighbours[i], kNeighbourTag));
  }
  for (int n : neighbours) rs.push_back(isend(send, count, dtype, n, kNeighbourTag));
  wait_all(rs);
}

std::vector<int> Communicator::ring_neighbours() const {
  const int n = size();
  return {(rank() + n - 1) % n, (rank() + 1) % n};
}

}  // namespace d5
