// Trainer checkpoints: parameters, optimizer state, sampler position and counters in one
// checkpoint file (checkpoint.h), so a resumed run continues bit for bit.
#include <fmt/format.h>

#include "deep500/train/checkpoint.h"
#include "deep500/core/error.h"
#include "deep500/train/trainer.h"

namespace d5 {

namespace {

constexpr const char* kKind = "deep500.training";
constexpr int kTrainingCheckpointVersion = 1;
constexpr const char* kParamPrefix = "param/";
constexpr const char* kOptimizerPrefix = "optimizer/";

}  // namespace

void Trainer::save_checkpoint(const std::string& path) const {
  Network& net = executor_.network();
  std::map<std::string, Tensor> tensors;
  for (const std::string& p : net.get_params()) tensors[kParamPrefix + p] = net.fetch_tensor(p).to(Device::cpu());
  for (auto& [k, v] : optimizer_.state()) tensors[kOptimizerPrefix + k] = v;
  const SamplerState s = position();
  const nlohmann::json meta = {{"kind", kKind},
                               {"version", kTrainingCheckpointVersion},
                               {"network", net.name()},
                               {"optimizer", optimizer_.name()},
                               {"sampler", {{"epoch", s.epoch}, {"batch", s.batch}, {"batch_size", batch_}}},
                               {"step", progress_.step},
                               {"samples", progress_.samples},
                               {"epochs_completed", epochs_completed_},
                               {"training_time_s", progress_.training_time_s}};
  d5::save_checkpoint(path, tensors, meta);
}

void Trainer::resume(const std::string& path) {
  D5_CHECK_ARG(!trained_, "resume() must come before train()");
  const Checkpoint ck = load_checkpoint(path);
  try {
    restore_from(ck, path);
  } catch (const nlohmann::json::exception& e) {
    D5_THROW(FormatError, "checkpoint '{}': malformed training metadata ({})", path, e.what());
  }
}

void Trainer::restore_from(const Checkpoint& ck, const std::string& path) {
  const nlohmann::json& m = ck.meta;
  if (m.value("kind", std::string()) != kKind || m.value("version", 0) != kTrainingCheckpointVersion) {
    D5_THROW(FormatError, "'{}' is not a training checkpoint of version {} (kind '{}', version {})", path,
             kTrainingCheckpointVersion, m.value("kind", std::string()), m.value("version", 0));
  }
  D5_CHECK_ARG(m.at("optimizer").get<std::string>() == optimizer_.name(),
               "checkpoint '{}' was written with optimizer '{}', this run uses '{}'", path,
               m.at("optimizer").get<std::string>(), optimizer_.name());
  D5_CHECK_ARG(m.at("sampler").at("batch_size").get<int64_t>() == batch_,
               "checkpoint '{}' was written with batch size {}, this run uses {}", path,
               m.at("sampler").at("batch_size").get<int64_t>(), batch_);

  // Copy every parameter before changing anything, checking names and shapes first, so a
  // mismatched checkpoint leaves the network as it was.
  Network& net = executor_.network();
  const std::vector<std::string> params = net.get_params();
  for (const std::string& p : params) {
    auto it = ck.tensors.find(kParamPrefix + p);
    D5_CHECK_ARG(it != ck.tensors.end(), "checkpoint '{}' has no parameter '{}' of network '{}'", path, p,
                 net.name());
    const Tensor current = net.fetch_tensor(p);
    D5_CHECK_ARG(it->second.desc().dtype == current.dtype() && it->second.shape() == current.shape(),
                 "checkpoint '{}' holds parameter '{}' as {}, network '{}' has {}", path, p,
                 it->second.desc().to_string(), net.name(), current.desc().to_string());
  }
  OptimizerState state;
  const std::string prefix = kOptimizerPrefix;
  for (const auto& [name, t] : ck.tensors) {
    if (name.rfind(prefix, 0) == 0) state[name.substr(prefix.size())] = t;
  }
  optimizer_.load_state(state);
  // In place: executors may hold views of the parameter tensors (the TorchExecutor does).
  for (const std::string& p : params) {
    Tensor current = net.fetch_tensor(p);
    current.copy_from(ck.tensors.at(kParamPrefix + p));
  }
  set_position({m.at("sampler").at("epoch").get<int64_t>(), m.at("sampler").at("batch").get<int64_t>()});
  progress_.step = m.at("step").get<int64_t>();
  progress_.samples = m.at("samples").get<int64_t>();
  progress_.epoch = position().epoch;
  progress_.training_time_s = m.at("training_time_s").get<double>();
  epochs_completed_ = m.at("epochs_completed").get<int64_t>();
}

}  // namespace d5
