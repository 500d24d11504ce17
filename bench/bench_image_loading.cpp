// Image loading from an indexed tar (docs/image-datasets.md). A tar of --images JPEGs
// (--size x --size, encoded with TurboJPEG here, in a temporary directory) is opened as an
// "image-tar" dataset, then:
//   1. batches of --batch images in shuffled order (random members anywhere in the tar) against
//      sequential order (consecutive members), interleaved round by round, alternating which goes
//      first: the ratio shuffled / sequential with a 95% CI. The Deep500 paper measured ~20x with
//      libjpeg-turbo and no prefetching on a cold ImageNet tar.
//   2. decode throughput (images/s) of sequential batches at each --threads count.
// The tar is small and was just written, so the OS page cache holds it: the warm figures measure
// pread from memory and decoding, not the disk. Part 1 is repeated "cold": before every batch the
// tar's pages are dropped from the page cache with posix_fadvise(DONTNEED) (no root needed; the
// fraction still resident, from mincore, is printed so the drop is verified, not assumed).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <thread>

#include "bench_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/image_datasets.h"
#include "deep500/train/page_cache.h"
#include "deep500/train/synthetic_images.h"
#include "lv2/images/jpeg.h"
#include "lv2/images/register_images.h"

namespace {

using namespace d5;
using namespace d5::bench;
namespace fs = std::filesystem;

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void evict(const std::string& path) { drop_from_page_cache(path); }
double resident(const std::string& path) { return page_cache_residency({path}).fraction(); }

struct OrderComparison {
  std::vector<double> seq_ms, shuf_ms, ratio;
  double resident_before = 0;  // mean fraction of the tar cached when a batch started
};

// Sequential batches (consecutive members) against shuffled ones (random members anywhere),
// interleaved, alternating which goes first; round 0 warms up. `cold` evicts the tar first.
OrderComparison compare_orders(const Dataset& ds, const std::string& tar, int n, int batch, int rounds, bool cold) {
  OrderComparison out;
  std::mt19937_64 rng(42);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const int batches = n / batch;
  int samples = 0;
  const auto timed = [&](const std::vector<int64_t>& idx) {
    if (cold) {
      evict(tar);
      out.resident_before += resident(tar);
      ++samples;
    }
    return seconds([&] { ds.fetch(idx); });
  };
  for (int r = 0; r <= rounds; ++r) {
    std::vector<int64_t> seq(static_cast<size_t>(batch)), shuf(static_cast<size_t>(batch));
    std::iota(seq.begin(), seq.end(), int64_t{r % batches} * batch);
    std::shuffle(order.begin(), order.end(), rng);
    std::copy(order.begin(), order.begin() + batch, shuf.begin());
    double ts = 0, tq = 0;
    if (r % 2) {
      tq = timed(seq);
      ts = timed(shuf);
    } else {
      ts = timed(shuf);
      tq = timed(seq);
    }
    if (r == 0) continue;
    out.seq_ms.push_back(tq * 1e3);
    out.shuf_ms.push_back(ts * 1e3);
    out.ratio.push_back(ts / tq);
  }
  if (samples) out.resident_before /= samples;
  return out;
}

std::string default_threads() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string s;
  for (int t = 1; t < hw; t *= 2) s += std::to_string(t) + ",";
  return s + std::to_string(hw);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv,
                  {{"images", "512"}, {"size", "256"}, {"batch", "128"}, {"rounds", "12"}, {"classes", "8"},
                   {"quality", "90"}, {"threads", default_threads()}, {"dir", ""}});
  D5_CHECK_ARG(jpeg_available(), "d5_bench_image_loading needs TurboJPEG: install libturbojpeg0-dev and rebuild");
  register_image_datasets();
  const int n = args.integer("images"), side = args.integer("size"), batch = args.integer("batch");
  const int rounds = args.integer("rounds"), classes = args.integer("classes");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  D5_CHECK_ARG(batch >= 1 && n >= 2 * batch && classes >= 1, "need --images >= 2 * --batch and --classes >= 1");

  const fs::path dir = args.str("dir").empty()
                           ? fs::temp_directory_path() / fmt::format("d5_bench_image_loading_{}", ::getpid())
                           : fs::path(args.str("dir"));
  fs::create_directories(dir);
  const std::string tar = (dir / "train.tar").string();
  SyntheticImagesOptions gen;
  gen.images = n;
  gen.side = side;
  gen.quality = args.integer("quality");
  gen.classes = classes;
  uint64_t jpeg_bytes = 0;
  const double t_write = seconds([&] { jpeg_bytes = write_synthetic_image_tar(tar, gen).jpeg_bytes; });
  fs::remove(image_tar_index_path(tar));
  bool rebuilt = false;
  const double t_index = seconds([&] { load_image_tar_index(tar, &rebuilt); });
  const double t_reload = seconds([&] { load_image_tar_index(tar, &rebuilt); });
  std::cout << fmt::format("{} JPEGs of {}x{} (mean {:.1f} KiB) in {} ({:.1f} MiB, written in {:.2f} s); "
                           "index built in {:.1f} ms, reloaded in {:.1f} ms\n",
                           n, side, side, jpeg_bytes / 1024.0 / n, tar, fs::file_size(tar) / 1048576.0, t_write,
                           t_index * 1e3, t_reload * 1e3);
  std::cout << fmt::format("page cache holds {:.0f}% of the tar after writing it\n", 100 * resident(tar));

  DatasetSpec spec;
  spec.name = "image-tar";
  spec.data_dir = tar;
  const auto thread_counts = args.list("threads");
  const std::string max_threads = thread_counts.back();

  // 1. shuffled vs sequential, at the largest thread count, page cache warm then dropped.
  spec.options = {{"threads", max_threads}};
  auto ds = open_dataset(spec);
  for (bool cold : {false, true}) {
    const OrderComparison c = compare_orders(*ds, tar, n, batch, rounds, cold);
    std::cout << fmt::format("\nbatches of {} at threads={}, page cache {} ({} rounds, median [95% CI]):\n", batch,
                             max_threads,
                             cold ? fmt::format("dropped before each batch (tar {:.1f}% resident when it started)",
                                                100 * c.resident_before)
                                  : std::string("warm"),
                             rounds);
    std::cout << fmt::format("  sequential  {} ms\n  shuffled    {} ms\n", with_ci(c.seq_ms, "{:.2f}"),
                             with_ci(c.shuf_ms, "{:.2f}"));
    std::cout << fmt::format("  shuffled / sequential: {}  (target <= 1.5)\n", with_ci(c.ratio));
  }

  // 2. decode throughput against threads.
  std::cout << fmt::format("\ndecode throughput, sequential batches of {} ({} rounds):\n", batch, rounds);
  std::cout << fmt::format("  {:>7}  {:>28}  {:>8}\n", "threads", "images/s median [95% CI]", "speedup");
  double base = 0;
  for (const auto& t : thread_counts) {
    spec.options = {{"threads", t}};
    auto ds = open_dataset(spec);
    std::vector<double> ips;
    for (int r = 0; r <= rounds; ++r) {
      std::vector<int64_t> seq(static_cast<size_t>(batch));
      std::iota(seq.begin(), seq.end(), int64_t{r % (n / batch)} * batch);
      const double s = seconds([&] { ds->fetch(seq); });
      if (r > 0) ips.push_back(batch / s);
    }
    const double m = median(ips);
    if (base == 0) base = m;
    std::cout << fmt::format("  {:>7}  {:>28}  {:>7.2f}x\n", t, with_ci(ips, "{:.0f}"), m / base);
  }
  std::cout << fmt::format("hardware threads: {}\n", std::thread::hardware_concurrency());
  if (args.str("dir").empty()) fs::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_image_loading: " << e.what() << "\n";
  return 1;
}
