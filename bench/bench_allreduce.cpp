// Level 3 communication, run under the MPI launcher (mpirun -np 4 d5_bench_allreduce):
//  1. d5's allreduce (Communicator::allreduce, with its timing and accounting) against a raw
//     MPI_Allreduce on the same buffers, DeepBench allreduce sizes (suites/deepbench), target
//     ratio <= 1.02;
//  2. a DSGD gradient exchange of ResNet-18's 62 gradient tensors: per-tensor allreduce against
//     bucketed (TensorBuckets, 25 MiB, fusing tensors under 128 KiB), target >= 1.5x at 4 ranks,
//     with the ceiling any bucketing has on this machine: the per-call cost of the calls removed;
//  3. the counted communication volume of one bucketed exchange against the gradient bytes;
//  4. a DSGD training step (LeNet-5 on the reference executor) with the allreduce overlapped with
//     backprop against reducing after it.
// Rounds interleave the two sides; each side's time is the slowest rank's (a barrier starts every
// timed call); the ratio is taken per round and reported as a median with a 95% CI.
#include <mpi.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/dist/distributed_optimizers.h"
#include "deep500/dist/distributed_schemes.h"
#include "deep500/net/executor_metrics.h"
#include "deep500/dist/gradient_buckets.h"
#include "deep500/op/op_registry.h"
#include "deep500/net/model_zoo.h"
#include "deep500/dist/mpi_world.h"

namespace {

using namespace d5;

double slowest(double local) {
  double m = 0;
  MPI_Allreduce(&local, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

template <typename F>
double timed(F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

std::vector<int64_t> deepbench_sizes(int64_t max_floats) {
  std::ifstream in(D5_SOURCE_DIR "/suites/deepbench/collectives/allreduce.csv");
  D5_CHECK(in.good(), IoError, "cannot read {}/suites/deepbench/collectives/allreduce.csv", D5_SOURCE_DIR);
  std::vector<int64_t> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (!line.empty() && std::stoll(line) <= max_floats) out.push_back(std::stoll(line));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto comm = mpi_world();
    bench::Args args(argc, argv, {{"rounds", "15"}, {"max-floats", "17000000"}, {"bucket-mb", "25"}, {"overlap-bucket-kb", "64"}, {"fuse-below-kb", "128"}});
    const int rounds = args.integer("rounds");
    const bool root = comm->rank() == 0;
    if (root) {
      std::cout << fmt::format("{} ranks ({}); rounds {}; time = slowest rank, barrier before each call\n",
                               comm->size(), comm->name(), rounds);
      std::cout << "1. d5 allreduce / raw MPI_Allreduce (sum, f32, in place), DeepBench sizes\n";
      std::cout << fmt::format("{:>10} {:>12} {:>12} {:>10} {:>30}\n", "floats", "raw ms", "d5 ms", "busbw GB/s",
                               "ratio d5/raw [95% CI]");
    }
    for (int64_t n : deepbench_sizes(static_cast<int64_t>(args.number("max-floats")))) {
      std::vector<float> buf(static_cast<size_t>(n), 1.0f);
      std::vector<double> raw, ours, ratio;
      comm->allreduce(std::span<float>(buf), ReduceOp::sum);  // warm-up: connections, pages
      for (int r = 0; r < rounds; ++r) {
        const double a = timed([&] {
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        });
        const double b = timed([&] { comm->allreduce(std::span<float>(buf), ReduceOp::sum); });
        raw.push_back(a);
        ours.push_back(b);
        ratio.push_back(b / a);
      }
      const double busbw = static_cast<double>(n) * 4 / bench::median(ours) *
                           CommunicationVolume::bus_factor("allreduce", comm->size()) / 1e9;
      if (root) {
        std::cout << fmt::format("{:>10} {:>12.3f} {:>12.3f} {:>10.2f} {:>30}\n", n, 1e3 * bench::median(raw),
                                 1e3 * bench::median(ours), busbw, bench::with_ci(ratio));
      }
    }

    // 2. ResNet-18's gradients (the parameter shapes of the zoo model).
    ModelOptions mo;
    mo.batch = 1;
    mo.classes = 1000;
    mo.input_shape = {3, 224, 224};
    const Network net = build_model("resnet18", mo);
    std::vector<Tensor> grads;
    int64_t grad_bytes = 0;
    for (const auto& p : net.get_params()) {
      grads.push_back(net.fetch_tensor(p).clone());
      grad_bytes += static_cast<int64_t>(grads.back().bytes());
    }
    // The baseline is what a plain DSGD does: one blocking allreduce per tensor as it comes.
    const auto bucket_bytes = static_cast<int64_t>(args.number("bucket-mb") * (1 << 20));
    const auto fuse_below = static_cast<int64_t>(args.number("fuse-below-kb") * 1024);
    // d5's DSGD (blocking buckets of small tensors), its nonblocking variant, and Horovod's way of
    // fusing everything up to the bucket size.
    TensorBuckets per_tensor(0), bucketed(bucket_bytes, false, fuse_below), nonblocking(bucket_bytes, true, fuse_below),
        fuse_all(bucket_bytes, false, bucket_bytes + 1);
    std::vector<TensorBuckets*> ways = {&per_tensor, &bucketed, &nonblocking, &fuse_all};
    for (auto* b : ways) b->allreduce(*comm, grads, ReduceOp::mean);
    std::vector<std::vector<double>> t(ways.size()), speedup(ways.size());
    // The most bucketing can save: fusing takes the small tensors' calls away but leaves the
    // large tensors' bytes to move. Timed: the small tensors reduced one by one (even free, the
    // exchange cannot get faster than without them), and 62 one-float allreduces (the bare per-call cost).
    std::vector<Tensor> small;
    for (const auto& g : grads)
      if (static_cast<int64_t>(g.bytes()) < fuse_below) small.push_back(g);
    TensorBuckets small_per_tensor(0);
    std::vector<float> one(grads.size(), 1.0f);
    std::vector<double> t_latency, t_small;
    for (int r = 0; r < rounds; ++r) {
      for (size_t w = 0; w < ways.size(); ++w) t[w].push_back(timed([&] { ways[w]->allreduce(*comm, grads, ReduceOp::mean); }));
      for (size_t w = 1; w < ways.size(); ++w) speedup[w].push_back(t[0].back() / t[w].back());
      t_latency.push_back(timed([&] {
        for (auto& x : one) comm->allreduce(&x, 1, DType::f32, ReduceOp::sum);
      }));
      t_small.push_back(timed([&] { small_per_tensor.allreduce(*comm, small, ReduceOp::mean); }));
    }
    // 3. One bucketed exchange, counted.
    comm->volume().reset();
    bucketed.allreduce(*comm, grads, ReduceOp::mean);
    const int64_t counted = comm->volume().collective_bytes("allreduce");
    if (root) {
      const double per_call = bench::median(t_latency) / static_cast<double>(grads.size());
      const double small_s = bench::median(t_small);
      std::cout << fmt::format(
          "2. DSGD exchange of ResNet-18's {} gradient tensors ({:.1f} MiB), buckets of <= {} MiB fusing tensors "
          "under {} KiB:\n"
          "   per-tensor blocking {:.2f} ms ({} calls); bucketed blocking {:.2f} ms ({} calls); nonblocking {:.2f} ms; "
          "fusing every tensor {:.2f} ms ({} calls)\n"
          "   speedup per-tensor / bucketed blocking    {}\n"
          "   speedup per-tensor / bucketed nonblocking {}\n"
          "   speedup per-tensor / fusing every tensor  {}\n"
          "   per-call cost {:.1f} us (62 one-float allreduces {:.2f} ms); the {} tensors under {} KiB take {:.2f} ms "
          "one by one: even free, the exchange could get at most {:.3f}x faster\n",
          grads.size(), static_cast<double>(grad_bytes) / (1 << 20), args.str("bucket-mb"),
          fuse_below / 1024, 1e3 * bench::median(t[0]), per_tensor.buckets(), 1e3 * bench::median(t[1]),
          bucketed.buckets(), 1e3 * bench::median(t[2]), 1e3 * bench::median(t[3]), fuse_all.buckets(),
          bench::with_ci(speedup[1], "{:.3f}"), bench::with_ci(speedup[2], "{:.3f}"),
          bench::with_ci(speedup[3], "{:.3f}"), 1e6 * per_call, 1e3 * bench::median(t_latency), small.size(),
          fuse_below / 1024, 1e3 * small_s, bench::median(t[0]) / (bench::median(t[0]) - small_s));
      std::cout << fmt::format("3. counted allreduce bytes per exchange {} = gradient bytes {}: {}\n", counted,
                               grad_bytes, counted == grad_bytes ? "yes" : "NO");
    }

    // 4. Overlap with backprop: two replicas of the same run, stepped alternately.
    register_builtin_operators();
    ModelOptions lo;
    lo.batch = 16;
    lo.classes = 10;
    lo.input_shape = {1, 28, 28};
    lo.with_loss = lo.training = true;
    struct Replica {
      Network net;
      std::unique_ptr<GraphExecutor> exec;
      std::unique_ptr<DistributedOptimizer> opt;
    };
    auto replica = [&](bool overlap) {
      auto r = std::make_unique<Replica>(Replica{build_model("lenet5", lo), nullptr, nullptr});
      ExecutorOptions eo;
      eo.deterministic = true;
      r->exec = make_executor(r->net, "reference", eo);
      // LeNet-5 has 241 KiB of gradients.
      const SchemeSettings o = {{"bucket_mb", args.number("overlap-bucket-kb") / 1024}, {"overlap", overlap ? 1 : 0}};
      r->opt = make_distributed_optimizer("dsgd", o, make_optimizer("sgd", {{"lr", 0.01}}), comm);
      return r;
    };
    auto with = replica(true), without = replica(false);
    const TensorMap feeds = synthetic_feeds(with->net, 7);
    for (auto* r : {with.get(), without.get()}) r->opt->step(*r->exec, feeds, kZooLoss);  // plans the buckets
    std::vector<double> t_with, t_without, gain;
    for (int r = 0; r < rounds; ++r) {
      const double a = timed([&] { without->opt->step(*without->exec, feeds, kZooLoss); });
      const double b = timed([&] { with->opt->step(*with->exec, feeds, kZooLoss); });
      t_without.push_back(a);
      t_with.push_back(b);
      gain.push_back(a / b);
    }
    const auto* dsgd = dynamic_cast<const ConsistentDecentralized*>(with->opt.get());
    if (root) {
      std::cout << fmt::format(
          "4. DSGD step, LeNet-5 batch 16 per rank, reference executor, buckets of {} KiB: after backprop "
          "{:.2f} ms, overlapped {:.2f} ms ({} of {} buckets started during backprop)\n"
          "   speedup after / overlapped {}\n",
          args.str("overlap-bucket-kb"), 1e3 * bench::median(t_without), 1e3 * bench::median(t_with), dsgd->overlap()->started_during_backprop(),
          dsgd->overlap()->planned_buckets(), bench::with_ci(gain, "{:.3f}"));
    }
    return counted == grad_bytes ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "d5_bench_allreduce: " << e.what() << "\n";
    abort_world(2);
    return 2;
  }
}
