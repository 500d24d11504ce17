// Data loader prefetch (docs/data-loader.md): how much of the cost of producing batches prefetch
// hides behind the consumer's work. A dataset whose fetch does real CPU work (generating
// 3x32x32 normal images sample by sample, standing in for decode) feeds a consumer that keeps a
// core busy for as long as producing a batch takes (standing in for a training step). Per round,
// one epoch synchronously (prefetch 0) and one with prefetch, in alternating order:
//   prefetch / synchronous epoch time: 1.0 = nothing hidden; 0.5 = production fully overlapped
//   (the ideal max(P, C) / (P + C) with P = C)
// plus DatasetLatency (fetch alone, median with 95% CI) and the consumer's wait per batch.
#include <iostream>

#include "bench_util.h"
#include "deep500/train/data_loader.h"
#include "deep500/train/dataset_metrics.h"
#include "deep500/core/rng.h"
#include "deep500/train/samplers.h"
#include "deep500/metrics/timer.h"

namespace {

using namespace d5;
using namespace d5::bench;

class GeneratedImages : public Dataset {
 public:
  GeneratedImages(int64_t samples, uint64_t seed) : samples_(samples), seed_(seed) {}
  std::string name() const override { return "generated-images"; }
  int64_t size() const override { return samples_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{3, 32, 32}}}, {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }
  int64_t classes() const override { return 10; }
  int64_t label(int64_t index) const override { return index % 10; }
  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor input(DType::f32, Shape{n, 3, 32, 32});
    Tensor labels(DType::i64, Shape{n});
    float* x = input.data_as<float>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = indices[static_cast<size_t>(i)];
      RngStream rng = RngStream(seed_, "generated-images").child(std::to_string(index));
      for (int64_t k = 0; k < 3 * 32 * 32; ++k) *x++ = static_cast<float>(rng.normal());
      labels.data_as<int64_t>()[i] = label(index);
    }
    return {{kDataInput, input}, {kDataLabels, labels}};
  }

 private:
  int64_t samples_;
  uint64_t seed_;
};

// Keeps this thread busy for `seconds`, as a training step would.
void busy_for(double seconds) {
  const int64_t until = wall_now_ns() + static_cast<int64_t>(seconds * 1e9);
  while (wall_now_ns() < until) {
  }
}

struct Epoch {
  double seconds;
  std::vector<double> waits;
};

Epoch run_epoch(const Dataset& ds, int64_t batch, int64_t prefetch, int workers, double step_s, uint64_t seed) {
  DataLoader loader(ds, std::make_unique<ShuffleSampler>(ds.size(), batch, false, seed), {prefetch, workers});
  const int64_t t0 = wall_now_ns();
  while (auto b = loader.next()) busy_for(step_s);
  Epoch e{static_cast<double>(wall_now_ns() - t0) * 1e-9, {}};
  for (const auto& t : loader.timings()) e.waits.push_back(t.wait_s * 1e3);
  return e;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv,
                  {{"samples", "2048"}, {"batch", "32"}, {"prefetch", "4"}, {"workers", "1"}, {"rounds", "10"}});
  const int64_t batch = args.integer("batch");
  const int rounds = args.integer("rounds");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  const GeneratedImages ds(args.integer("samples"), 1);

  DatasetLatency latency;
  ShuffleSampler sampler(ds.size(), batch, false, 2);
  latency.measure_fetch(ds, sampler, 64);
  const MetricRecord lat = latency.result();
  std::vector<double> lat_ms;
  for (double s : lat.samples) lat_ms.push_back(s * 1e3);
  const double step_s = lat.summary->median;  // consumer work per batch = production time
  std::cout << fmt::format("{} samples, batch {}: DatasetLatency (fetch alone) {} ms per batch; consumer step {:.3f} ms\n",
                           ds.size(), batch, with_ci(lat_ms, "{:.3f}"), step_s * 1e3);

  const int64_t k = args.integer("prefetch");
  const int workers = args.integer("workers");
  std::vector<double> ratios, sync_s, pre_s, sync_wait, pre_wait;
  for (int r = 0; r <= rounds; ++r) {
    Epoch sync, pre;
    if (r % 2 == 0) {
      sync = run_epoch(ds, batch, 0, 1, step_s, 3);
      pre = run_epoch(ds, batch, k, workers, step_s, 3);
    } else {
      pre = run_epoch(ds, batch, k, workers, step_s, 3);
      sync = run_epoch(ds, batch, 0, 1, step_s, 3);
    }
    if (r == 0) continue;  // warm-up round
    ratios.push_back(pre.seconds / sync.seconds);
    sync_s.push_back(sync.seconds * 1e3);
    pre_s.push_back(pre.seconds * 1e3);
    sync_wait.push_back(median(sync.waits));
    pre_wait.push_back(median(pre.waits));
  }
  std::cout << fmt::format("epoch, synchronous:         {} ms\n", with_ci(sync_s, "{:.1f}"));
  std::cout << fmt::format("epoch, prefetch {} ({} worker{}): {} ms\n", k, workers, workers == 1 ? "" : "s",
                           with_ci(pre_s, "{:.1f}"));
  std::cout << fmt::format("consumer wait per batch (median per epoch), synchronous: {} ms, prefetch: {} ms\n",
                           with_ci(sync_wait, "{:.3f}"), with_ci(pre_wait, "{:.3f}"));
  std::cout << fmt::format("prefetch / synchronous epoch time: {}  (0.5 = production fully hidden, 1.0 = not at all)\n",
                           with_ci(ratios));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_data_loader: " << e.what() << "\n";
  return 1;
}
