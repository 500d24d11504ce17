#pragma once
// Level 3: what a rank communicated (docs/communicator.md).
//
// Every Communicator call records here, whatever the implementation underneath:
// - point-to-point (send, recv, sendrecv, neighbour exchange and their nonblocking forms): bytes
//   and messages per peer, exactly as called;
// - rooted collectives (broadcast, gather(v), scatter): the root's logical exchange with every
//   other rank (a flat tree) per peer, since the tree MPI uses is its own choice;
// - every collective: calls, payload bytes per call (the `count` elements the caller passed, the
//   quantity nccl-tests reports as "size") and the time spent, per operation, from which algbw
//   and busbw follow with the nccl-tests formulas.
// Time is wall time inside the calls, including waits on nonblocking requests.
// Tensors on a device the communicator cannot reach travel through host memory (host_staging.h):
// those copies are counted apart, as `staging`, since they are not what the ranks exchanged. A
// communicator that reaches device memory (device_aware_communicator.h) counts per operation the
// calls a device library carried, so both paths show.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d5 {

struct PeerVolume {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t messages_sent = 0;
  int64_t messages_received = 0;
};

struct CollectiveVolume {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes summed over calls
  double time_s = 0;  // blocking calls only: a nonblocking one's time is the caller's waits
  // Of calls and bytes, those a device library (NCCL) carried from device memory to device
  // memory; the rest went through the host communicator (MPI).
  int64_t device_calls = 0;
  int64_t device_bytes = 0;
  // nccl-tests: algbw = size / time; busbw = algbw x the operation's bus factor (bus_factor()).
  double algbw() const { return time_s > 0 ? static_cast<double>(bytes) / time_s : 0; }
};

// Copies between a device and host memory made so that a communicator could carry the bytes.
struct StagingVolume {
  int64_t bytes_to_host = 0;
  int64_t bytes_from_host = 0;
  int64_t copies_to_host = 0;
  int64_t copies_from_host = 0;
  double time_s = 0;  // the copies' wall time, including the wait for the device
};

class CommunicationVolume {
 public:
  explicit CommunicationVolume(int ranks = 1);

  void record_send(int peer, int64_t bytes);
  void record_receive(int peer, int64_t bytes);
  void record_collective(const std::string& op, int64_t bytes, double seconds, bool on_device = false);
  void add_time(double seconds) { time_s_ += seconds; }
  void record_staging_to_host(int64_t bytes, double seconds);
  void record_staging_from_host(int64_t bytes, double seconds);
  void reset();

  int ranks() const { return static_cast<int>(peers_.size()); }
  const std::vector<PeerVolume>& peers() const { return peers_; }
  const std::map<std::string, CollectiveVolume>& collectives() const { return collectives_; }
  int64_t bytes_sent() const;       // point-to-point and rooted collectives, all peers
  int64_t bytes_received() const;
  int64_t collective_bytes(const std::string& op) const;  // 0 when never called
  double time_s() const { return time_s_; }
  const StagingVolume& staging() const { return staging_; }

  // nccl-tests' bus factor turning algbw into busbw on n ranks: allreduce 2(n-1)/n,
  // allgather / reduce_scatter / gather / scatter (n-1)/n, broadcast 1.
  static double bus_factor(const std::string& op, int ranks);
  double busbw(const std::string& op) const;

  // {"time_s", "bytes_sent", "bytes_received", "peers": [...], "collectives": {op: {...}},
  //  "staging": {...}}
  nlohmann::json to_json() const;

 private:
  std::vector<PeerVolume> peers_;
  std::map<std::string, CollectiveVolume> collectives_;
  StagingVolume staging_;
  double time_s_ = 0;
};

}  // namespace d5
