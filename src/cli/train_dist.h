#pragma once
// d5 train --dist: the distributed parts of a training run (docs/train.md, docs/distributed.md).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "deep500/dist/communicator.h"
#include "deep500/dist/distributed_schemes.h"
#include "deep500/metrics/results.h"
#include "deep500/train/trainer.h"

namespace d5::cli {

struct DistOptions {
  std::string scheme;      // empty (the default): not distributed
  SchemeSettings given;    // the scheme options given on the command line; the rest default
  double timeout_s = -1;   // the watchdog's; -1: $D5_WATCHDOG_TIMEOUT or the default
  std::string comm = "auto";  // for GPU tensors: auto, mpi (host staging), nccl or cuda-mpi
  std::string comm_choice;    // what was chosen for this run, and why
};

void add_dist_options(CLI::App& cmd, DistOptions& o);

// MPI's world when --dist was given or the process was started by an MPI launcher; null for a
// plain run. InvalidArgument for several ranks without --dist, Unimplemented without MPI.
std::shared_ptr<Communicator> dist_communicator(const DistOptions& o);

// The communicator the scheme gets: MPI's world as it is, or with a device library for tensors on
// this rank's GPU: NCCL (--comm nccl, or auto when NCCL can serve the ranks), else a CUDA-aware
// MPI (--comm cuda-mpi, or auto when the MPI library says it is one and every rank has a GPU);
// records the choice and its reason in o.comm_choice. Collective.
std::shared_ptr<Communicator> communicator_for_tensors(std::shared_ptr<Communicator> world, DistOptions& o,
                                                       bool gpu_tensors);

// Gathers every rank's metrics at rank 0 and adds them, with their summary and the scheme's
// options, to the case there. Collective: every rank calls it.
void add_distributed_results(Communicator& comm, const DistOptions& o, const DistributedOptimizer& optimizer,
                             const TrainingResult& result, CaseResult& c);

}  // namespace d5::cli
