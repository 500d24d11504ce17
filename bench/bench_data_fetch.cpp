// Batch assembly of the in-memory and memory-mapped dataset formats: a batch of shuffled indices
// against a batch of consecutive ones, interleaved in one run (ratio per pair, median with 95% CI),
// and both rates in samples/s. Even for samples held in memory (or in the page cache) order costs
// something: consecutive rows stream through the hardware prefetcher, scattered ones miss the
// caches; the ratio says how much, the rates whether it matters next to a training step.
//
//   d5_bench_data_fetch [--batch 128] [--runs 200] [--mnist ../shared/data/mnist]
#include <filesystem>
#include <numeric>

#include "bench_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/rng.h"

namespace {

using namespace d5;

void compare(const std::string& label, const Dataset& ds, int64_t batch, int runs) {
  const int64_t batches = ds.size() / batch;
  D5_CHECK_ARG(batches >= 1, "{} has {} samples, fewer than one batch of {}", label, ds.size(), batch);
  std::vector<int64_t> order(static_cast<size_t>(ds.size()));
  std::iota(order.begin(), order.end(), 0);
  RngStream rng(1, "bench-data-fetch");
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);

  std::vector<double> ratios, sequential_rate, shuffled_rate;
  for (int r = 0; r < runs + 5; ++r) {  // the first 5 pairs warm caches and are dropped
    const int64_t k = r % batches;
    std::vector<int64_t> seq(static_cast<size_t>(batch));
    std::iota(seq.begin(), seq.end(), k * batch);
    const std::vector<int64_t> shuf(order.begin() + k * batch, order.begin() + (k + 1) * batch);
    const double t_seq = bench::hand_loop([&] { (void)ds.fetch(seq); }, 1)[0];
    const double t_shuf = bench::hand_loop([&] { (void)ds.fetch(shuf); }, 1)[0];
    if (r < 5) continue;
    ratios.push_back(t_shuf / t_seq);
    sequential_rate.push_back(static_cast<double>(batch) / t_seq);
    shuffled_rate.push_back(static_cast<double>(batch) / t_shuf);
  }
  fmt::print("{:<32} shuffled/sequential {}\n{:<32} samples/s: sequential {}, shuffled {}\n", label,
             bench::with_ci(ratios), "", bench::with_ci(sequential_rate, "{:.3g}"),
             bench::with_ci(shuffled_rate, "{:.3g}"));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const bench::Args args(argc, argv, {{"batch", "128"}, {"runs", "200"}, {"mnist", D5_SOURCE_DIR "/../shared/data/mnist"}});
    const int64_t batch = args.integer("batch");
    const int runs = args.integer("runs");
    register_builtin_datasets();
    fmt::print("batch {}, {} interleaved pairs; medians with 95% CIs\n", batch, runs);

    const auto synthetic = open_dataset(DatasetSpec{"synthetic-learnable", "", "train", 1, {{"samples", "10000"}}});
    compare("synthetic-learnable 1x28x28", *synthetic, batch, runs);

    const std::string mnist_dir = args.str("mnist");
    if (!std::filesystem::exists(mnist_dir + "/t10k-images-idx3-ubyte.gz")) {
      fmt::print("mnist and npy: skipped, no MNIST test split in {}\n", mnist_dir);
      return 0;
    }
    const auto mnist = open_dataset(DatasetSpec{"mnist", mnist_dir, "test", 0, {}});
    compare("mnist (in memory, u8 -> f32)", *mnist, batch, runs);

    // The same images as NPY u8, memory-mapped.
    const auto dir = std::filesystem::temp_directory_path() / "d5-bench-data-fetch";
    std::filesystem::create_directories(dir);
    const IdxArray images = read_idx_file(mnist_dir + "/t10k-images-idx3-ubyte.gz", kIdxImagesMagic);
    const IdxArray labels = read_idx_file(mnist_dir + "/t10k-labels-idx1-ubyte.gz", kIdxLabelsMagic);
    Tensor x(DType::u8, Shape{images.dims[0], 1, images.dims[1], images.dims[2]});
    std::memcpy(x.data(), images.data.data(), images.data.size());
    Tensor y(DType::u8, Shape{labels.dims[0]});
    std::memcpy(y.data(), labels.data.data(), labels.data.size());
    write_npy_file((dir / "inputs.npy").string(), x);
    write_npy_file((dir / "labels.npy").string(), y);
    const auto npy = open_dataset(DatasetSpec{"npy", dir.string(), "train", 0, {}});
    compare("npy (memory-mapped, u8 -> f32)", *npy, batch, runs);
    std::filesystem::remove_all(dir);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "d5_bench_data_fetch: {}\n", e.what());
    return 1;
  }
}
