// CommunicationVolume: per-peer and per-collective counters (include/deep500/dist/communication_volume.h).
#include "deep500/dist/communication_volume.h"

#include "deep500/core/error.h"

namespace d5 {

CommunicationVolume::CommunicationVolume(int ranks) : peers_(static_cast<size_t>(ranks)) {
  D5_CHECK_ARG(ranks >= 1, "a communication volume needs at least one rank, not {}", ranks);
}

void CommunicationVolume::record_send(int peer, int64_t bytes) {
  PeerVolume& p = peers_.at(static_cast<size_t>(peer));
  p.bytes_sent += bytes;
  ++p.messages_sent;
}

void CommunicationVolume::record_receive(int peer, int64_t bytes) {
  PeerVolume& p = peers_.at(static_cast<size_t>(peer));
  p.bytes_received += bytes;
  ++p.messages_received;
}

void CommunicationVolume::record_collective(const std::string& op, int64_t bytes, double seconds, bool on_device) {
  CollectiveVolume& c = collectives_[op];
  ++c.calls;
  c.bytes += bytes;
  c.time_s += seconds;
  if (on_device) {
    ++c.device_calls;
    c.device_bytes += bytes;
  }
}

void CommunicationVolume::record_staging_to_host(int64_t bytes, double seconds) {
  staging_.bytes_to_host += bytes;
  ++staging_.copies_to_host;
  staging_.time_s += seconds;
}

void CommunicationVolume::record_staging_from_host(int64_t bytes, double seconds) {
  staging_.bytes_from_host += bytes;
  ++staging_.copies_from_host;
  staging_.time_s += seconds;
}

void CommunicationVolume::reset() {
  for (auto& p : peers_) p = PeerVolume{};
  collectives_.clear();
  staging_ = StagingVolume{};
  time_s_ = 0;
}

int64_t CommunicationVolume::bytes_sent() const {
  int64_t s = 0;
  for (const auto& p : peers_) s += p.bytes_sent;
  return s;
}

int64_t CommunicationVolume::bytes_received() const {
  int64_t s = 0;
  for (const auto& p : peers_) s += p.bytes_received;
  return s;
}

int64_t CommunicationVolume::collective_bytes(const std::string& op) const {
  auto it = collectives_.find(op);
  return it == collectives_.end() ? 0 : it->second.bytes;
}

double CommunicationVolume::bus_factor(const std::string& op, int ranks) {
  const double n = ranks;
  if (op == "allreduce" || op == "iallreduce") return 2 * (n - 1) / n;
  if (op == "broadcast" || op == "ibroadcast") return 1;
  return (n - 1) / n;  // allgather(v), gather(v), scatter, reduce_scatter
}

double CommunicationVolume::busbw(const std::string& op) const {
  auto it = collectives_.find(op);
  return it == collectives_.end() ? 0 : it->second.algbw() * bus_factor(op, ranks());
}

nlohmann::json CommunicationVolume::to_json() const {
  nlohmann::json j;
  j["time_s"] = time_s_;
  j["bytes_sent"] = bytes_sent();
  j["bytes_received"] = bytes_received();
  j["peers"] = nlohmann::json::array();
  for (const auto& p : peers_) {
    j["peers"].push_back({{"bytes_sent", p.bytes_sent},
                          {"bytes_received", p.bytes_received},
                          {"messages_sent", p.messages_sent},
                          {"messages_received", p.messages_received}});
  }
  j["collectives"] = nlohmann::json::object();
  for (const auto& [op, c] : collectives_) {
    j["collectives"][op] = {{"calls", c.calls}, {"bytes", c.bytes}, {"time_s", c.time_s},
                            {"algbw", c.algbw()}, {"busbw", busbw(op)},
                            {"device_calls", c.device_calls}, {"device_bytes", c.device_bytes}};
  }
  j["staging"] = {{"bytes_to_host", staging_.bytes_to_host},
                  {"bytes_from_host", staging_.bytes_from_host},
                  {"copies_to_host", staging_.copies_to_host},
                  {"copies_from_host", staging_.copies_from_host},
                  {"time_s", staging_.time_s}};
  return j;
}

}  // namespace d5
