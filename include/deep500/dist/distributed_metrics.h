#pragma once
// Level 3: metrics of a distributed run (docs/distributed.md).
//
// Each rank describes itself (rank_metrics); gather_at_root collects every rank's description at
// rank 0, which alone writes results; distributed_summary turns them into the run's figures:
// communication volume per rank and per step, and load imbalance as the spread of the ranks'
// compute and communication (wait) times.
#include <nlohmann/json.hpp>

#include "deep500/dist/communicator.h"
#include "deep500/dist/distributed_optimizer.h"
#include "deep500/train/trainer.h"

namespace d5 {

// {"rank", "scheme" (the scheme's own facts), "steps", "step_time_s" (sum), "compute_s",
//  "communication_s", "data_time_s",
//  "training_time_s", "epochs_completed", "epoch_time_s",
//  "bytes_per_step" (collective payload + point-to-point sent, per step), "volume" (to_json())}.
nlohmann::json rank_metrics(const Communicator& comm, const DistributedOptimizer& optimizer,
                            const TrainingResult& result);

// Every rank's `mine`, in rank order, at root (an array); null elsewhere. Collective.
nlohmann::json gather_at_root(Communicator& comm, const nlohmann::json& mine, int root = 0);

// From the gathered array: ranks, per-rank bytes_per_step (min, max), and for compute_s and
// communication_s and data_time_s the min, max, mean and imbalance (max - min) / mean.
nlohmann::json distributed_summary(const nlohmann::json& ranks);

}  // namespace d5
