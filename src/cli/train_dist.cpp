// d5 train --dist (src/cli/train_dist.h).
#include "train_dist.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/dist/cuda_aware_mpi.h"
#include "deep500/dist/device_aware_communicator.h"
#include "deep500/dist/distributed_metrics.h"
#include "deep500/dist/mpi_world.h"
#include "deep500/dist/nccl.h"

namespace d5::cli {

void add_dist_options(CLI::App& cmd, DistOptions& o) {
  std::vector<std::string> names;
  for (const auto& [n, d] : distributed_scheme_names()) names.push_back(n);
  cmd.add_option("--dist", o.scheme,
                 fmt::format("Distributed scheme when run under mpirun/srun: {} (--batch is per rank)",
                             fmt::join(names, ", ")))
      ->check(CLI::IsMember(names));
  // Each flag sets one scheme option; a scheme refuses a flag that is not one of its options.
  auto option = [&](const std::string& flag, const std::string& name, const std::string& help) {
    return cmd.add_option_function<double>(flag, [&o, name](double v) { o.given[name] = v; }, help);
  };
  option("--bucket-mb", "bucket_mb", "dsgd: fuse gradients into allreduces of this many MiB (0: per tensor; default 25)")
      ->check(CLI::NonNegativeNumber);
  option("--fuse-kb", "fuse_kb",
         "dsgd: only gradients smaller than this many KiB are packed into buckets; larger ones are reduced "
         "alone, in place (default 128)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag_callback("--no-overlap", [&o] { o.given["overlap"] = 0; },
                        "dsgd: reduce gradients after backprop instead of starting buckets as gradients become ready");
  option("--staleness", "staleness", "ssgd: apply gradients up to this many steps late (default 0)")
      ->check(CLI::NonNegativeNumber);
  option("--avg-every", "average_every", "mavg: local steps between parameter averages (default 1)")
      ->check(CLI::PositiveNumber);
  cmd.add_flag_callback("--fixed-order", [&o] { o.given["fixed_order"] = 1; },
                        "asgd: serve workers in rank order, one push each per step, so that a run is "
                        "deterministic (default: whichever worker pushes first)");
  option("--topk", "topk", "sparse: fraction of gradient elements each rank sends, in (0, 1] (default 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--dist-timeout", o.timeout_s,
                 "Seconds a rank may go unheard before the watchdog ends the run naming it (default 20, or "
                 "$D5_WATCHDOG_TIMEOUT; 0: no watchdog)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--comm", o.comm,
                 "How ranks communicate tensors on a GPU: auto (where the executor's tensors are on a GPU: NCCL when "
                 "this d5 has it and every rank has a GPU of its own, else a CUDA-aware MPI when the MPI library says "
                 "it is one, else MPI through host memory), mpi (through host memory), nccl or cuda-mpi (required; "
                 "docs/communicator.md#nccl, #cuda-aware-mpi)")
      ->check(CLI::IsMember({"auto", "mpi", "nccl", "cuda-mpi"}))
      ->default_val("auto");
}

std::shared_ptr<Communicator> dist_communicator(const DistOptions& o) {
  if (o.scheme.empty()) {
    std::vector<std::string> given;
    for (const auto& [name, value] : o.given) given.push_back(name);
    if (o.comm != "auto") given.push_back("comm");
    D5_CHECK_ARG(given.empty(), "distributed scheme options ({}) need --dist", fmt::join(given, ", "));
  }
  if (o.scheme.empty() && !launched_by_mpi_launcher()) return nullptr;
  if (o.timeout_s >= 0) set_mpi_watchdog_timeout(o.timeout_s);
  auto comm = mpi_world();
  if (o.scheme.empty()) {
    std::vector<std::string> names;
    for (const auto& [n, d] : distributed_scheme_names()) names.push_back(n);
    D5_CHECK_ARG(comm->size() == 1,
                 "d5 train runs on {} ranks but was not told how to distribute: add --dist SCHEME ({})",
                 comm->size(), fmt::join(names, ", "));
    return nullptr;
  }
  return comm;
}

std::shared_ptr<Communicator> communicator_for_tensors(std::shared_ptr<Communicator> world, DistOptions& o,
                                                       bool gpu_tensors) {
  if (o.comm == "mpi" || (o.comm == "auto" && !gpu_tensors)) {
    o.comm_choice = o.comm == "mpi" ? "--comm mpi" : "the executor's tensors are in host memory";
    return world;
  }
  // Each library refuses alike on every rank (NotBuilt, no GPU, ranks sharing one, an MPI that is
  // not CUDA-aware), so all ranks take the same path.
  std::vector<std::string> refusals;
  auto attempt = [&](const std::string& flag, auto make) -> std::unique_ptr<DeviceCollectives> {
    if (o.comm != "auto" && o.comm != flag) return nullptr;
    try {
      return make(*world);
    } catch (const Unimplemented& e) {
      if (o.comm == flag) throw;
      refusals.emplace_back(e.what());
      return nullptr;
    }
  };
  std::unique_ptr<DeviceCollectives> device = attempt("nccl", make_nccl_collectives);
  if (device) {
    o.comm_choice = o.comm == "nccl" ? "--comm nccl" : "the executor's tensors are on a GPU of each rank's own";
  } else if ((device = attempt("cuda-mpi", make_cuda_aware_mpi_collectives))) {
    o.comm_choice = o.comm == "cuda-mpi" ? "--comm cuda-mpi"
                                         : fmt::format("the executor's tensors are on a GPU and the MPI library is "
                                                       "CUDA-aware ({})", mpi_cuda_support().says);
  } else {
    o.comm_choice = fmt::format("GPU tensors staged through host memory for MPI: {}", fmt::join(refusals, "; "));
    return world;
  }
  return std::make_shared<DeviceAwareCommunicator>(std::move(world), std::move(device));
}

void add_distributed_results(Communicator& comm, const DistOptions& o, const DistributedOptimizer& optimizer,
                             const TrainingResult& result, CaseResult& c) {
  const nlohmann::json ranks = gather_at_root(comm, rank_metrics(comm, optimizer, result));
  if (comm.rank() != 0) return;
  c.level = "L3";
  // The scheme's own options, as it ran with them.
  c.params["dist"] = {{"scheme", o.scheme},
                      {"ranks", comm.size()},
                      {"options", scheme_settings(o.scheme, o.given)},
                      {"watchdog_s", mpi_watchdog_timeout()},
                      {"communicator", comm.name()},
                      {"communicator_choice", o.comm_choice},
                      {"global_batch", c.params.value("batch", int64_t{0}) * comm.size()}};
  c.extra["distributed"] = {{"summary", distributed_summary(ranks)}, {"ranks", ranks}};
}

}  // namespace d5::cli
