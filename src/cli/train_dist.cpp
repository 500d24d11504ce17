// d5 train --dist (src/cli/train_dist.h).
#include "train_dist.h"

#include "deep500/dist/distributed_metrics.h"
#include "deep500/core/error.h"
#include "deep500/dist/mpi_world.h"

namespace d5::cli {

void add_dist_options(CLI::App& cmd, DistOptions& o) {
  std::vector<std::string> names;
  for (const auto& [n, d] : distributed_scheme_names()) names.push_back(n);
  cmd.add_option("--dist", o.scheme.scheme,
                 "Distributed scheme when run under mpirun/srun: dsgd, pssgd, asgd, ssgd, mavg, dpsgd, sparse "
                 "(--batch is per rank)")
      ->check(CLI::IsMember(names));
  cmd.add_option("--bucket-mb", o.scheme.bucket_mb, "dsgd: fuse gradients into allreduces of this many MiB (0: per tensor)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(25);
  cmd.add_option("--fuse-kb", o.scheme.fuse_kb,
                 "dsgd: only gradients smaller than this many KiB are packed into buckets; larger ones are reduced "
                 "alone, in place")
      ->check(CLI::NonNegativeNumber)
      ->default_val(o.scheme.fuse_kb);
  cmd.add_flag("--no-overlap{false}", o.scheme.overlap,
               "dsgd: reduce gradients after backprop instead of starting buckets as gradients become ready");
  cmd.add_option("--staleness", o.scheme.staleness, "ssgd: apply gradients up to this many steps late")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  cmd.add_option("--avg-every", o.scheme.average_every, "mavg: local steps between parameter averages")
      ->check(CLI::PositiveNumber)
      ->default_val(1);
  cmd.add_option("--topk", o.scheme.topk, "sparse: fraction of gradient elements each rank sends, in (0, 1]")
      ->check(CLI::Range(0.0, 1.0))
      ->default_val(0.01);
  cmd.add_option("--dist-timeout", o.timeout_s,
                 "Seconds a rank may go unheard before the watchdog ends the run naming it (default 20, or "
                 "$D5_WATCHDOG_TIMEOUT; 0: no watchdog)")
      ->check(CLI::NonNegativeNumber);
}

std::shared_ptr<Communicator> dist_communicator(const DistOptions& o) {
  if (o.scheme.scheme.empty() && !launched_by_mpi_launcher()) return nullptr;
  if (o.timeout_s >= 0) set_mpi_watchdog_timeout(o.timeout_s);
  auto comm = mpi_world();
  if (o.scheme.scheme.empty()) {
    D5_CHECK_ARG(comm->size() == 1,
                 "d5 train runs on {} ranks but was not told how to distribute: add --dist dsgd (or pssgd, asgd, "
                 "ssgd, mavg, dpsgd, sparse)",
                 comm->size());
    return nullptr;
  }
  return comm;
}

void add_distributed_results(Communicator& comm, const DistOptions& o, const DistributedOptimizer& optimizer,
                             const TrainingResult& result, CaseResult& c) {
  const nlohmann::json ranks = gather_at_root(comm, rank_metrics(comm, optimizer, result));
  if (comm.rank() != 0) return;
  c.level = "L3";
  c.params["dist"] = {{"scheme", o.scheme.scheme},
                      {"ranks", comm.size()},
                      {"bucket_mb", o.scheme.bucket_mb},
                      {"fuse_kb", o.scheme.fuse_kb},
                      {"overlap", o.scheme.overlap},
                      {"staleness", o.scheme.staleness},
                      {"avg_every", o.scheme.average_every},
                      {"topk", o.scheme.topk},
                      {"watchdog_s", mpi_watchdog_timeout()},
                      {"global_batch", c.params.value("batch", int64_t{0}) * comm.size()}};
  c.extra["distributed"] = {{"summary", distributed_summary(ranks)}, {"ranks", ranks}};
}

}  // namespace d5::cli
