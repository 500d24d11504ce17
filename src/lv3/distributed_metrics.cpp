// Per-rank metrics, their gathering and summary (include/deep500/dist/distributed_metrics.h).
#include "deep500/dist/distributed_metrics.h"

#include <algorithm>
#include <numeric>

#include "deep500/dist/distributed_optimizers.h"
#include "deep500/core/error.h"

namespace d5 {

nlohmann::json rank_metrics(const Communicator& comm, const DistributedOptimizer& optimizer,
                            const TrainingResult& result) {
  const DistributedStepTimes& t = optimizer.times();
  const double step = std::accumulate(t.step_s.begin(), t.step_s.end(), 0.0);
  const double communication = std::accumulate(t.communication_s.begin(), t.communication_s.end(), 0.0);
  const double data = std::accumulate(result.data_times_s.begin(), result.data_times_s.end(), 0.0);
  const CommunicationVolume& v = comm.volume();
  int64_t bytes = v.bytes_sent();
  for (const auto& [op, c] : v.collectives()) {
    // Rooted collectives are already counted per peer.
    if (op != "broadcast" && op != "ibroadcast" && op != "gather" && op != "scatter") bytes += c.bytes;
  }
  const auto steps = static_cast<int64_t>(t.step_s.size());
  // Copies between a device and the host that let a host-memory communicator carry the tensors.
  const int64_t staged = v.staging().bytes_to_host + v.staging().bytes_from_host;
  nlohmann::json scheme_facts = nlohmann::json::object();
  if (const auto* sparse = dynamic_cast<const SparseAllreduce*>(&optimizer))
    scheme_facts["dense_steps"] = sparse->dense_steps();
  return {{"rank", comm.rank()},
          {"scheme", scheme_facts},
          {"steps", steps},
          {"step_time_s", step},
          {"compute_s", step - communication},
          {"communication_s", communication},
          {"data_time_s", data},
          {"training_time_s", result.training_time_s},
          {"epochs_completed", result.epochs_completed},
          // Epochs this run completed, over its training time (0 when none completed).
          {"epoch_time_s", result.epochs_completed > 0
                               ? result.training_time_s / static_cast<double>(result.epochs_completed)
                               : 0.0},
          {"bytes_per_step", steps > 0 ? static_cast<double>(bytes) / static_cast<double>(steps) : 0.0},
          {"staged_bytes_per_step", steps > 0 ? static_cast<double>(staged) / static_cast<double>(steps) : 0.0},
          {"volume", v.to_json()}};
}

nlohmann::json gather_at_root(Communicator& comm, const nlohmann::json& mine, int root) {
  const std::string text = mine.dump();
  const auto length = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(static_cast<size_t>(comm.size()));
  comm.gather(&length, 1, DType::i64, lengths.data(), root);
  const bool at_root = comm.rank() == root;
  std::string all(at_root ? static_cast<size_t>(std::accumulate(lengths.begin(), lengths.end(), int64_t{0})) : 0, '\0');
  comm.gatherv(text.data(), length, DType::u8, all.data(), lengths, root);
  if (!at_root) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  size_t at = 0;
  for (int64_t l : lengths) {
    out.push_back(nlohmann::json::parse(all.substr(at, static_cast<size_t>(l))));
    at += static_cast<size_t>(l);
  }
  return out;
}

namespace {

nlohmann::json spread(const nlohmann::json& ranks, const char* key) {
  std::vector<double> v;
  for (const auto& r : ranks) v.push_back(r.at(key).get<double>());
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return {{"min", *lo}, {"max", *hi}, {"mean", mean}, {"imbalance", mean > 0 ? (*hi - *lo) / mean : 0.0}};
}

}  // namespace

nlohmann::json distributed_summary(const nlohmann::json& ranks) {
  D5_CHECK_ARG(ranks.is_array() && !ranks.empty(), "a distributed summary needs every rank's metrics");
  return {{"ranks", ranks.size()},
          {"bytes_per_step", spread(ranks, "bytes_per_step")},
          {"compute_s", spread(ranks, "compute_s")},
          {"communication_s", spread(ranks, "communication_s")},
          {"data_time_s", spread(ranks, "data_time_s")}};
}

}  // namespace d5
