// d5 data bench: DatasetLatency of one dataset configuration (real or synthetic source, sequential
// or shuffled order, warm or cold page cache, one reading process or several), written as a
// results file (docs/data-bench.md). The paper's Fig. 8 and Table III are recipes over it.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data_cli.h"
#include "deep500/core/error.h"
#include "deep500/metrics/exit_codes.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/statistics.h"
#include "deep500/metrics/timer.h"
#include "deep500/train/page_cache.h"
#include "deep500/train/samplers.h"
#include "deep500/train/synthetic_images.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BenchArgs {
  DatasetArgs ds;
  std::string source = "real", order = "sequential", cache = "warm";
  int64_t generate_images = 0;
  int image_size = 256, image_quality = 90;
  int64_t image_classes = 8;
  std::string work_dir;
  int64_t batch = 64, batches = 30, warmup = 2;
  int ranks = 1;
  double target_ci = 0.05;
  OutputOptions out;
};

// What one reading process measured. Times come from steady_clock (CLOCK_MONOTONIC), which every
// process of the machine shares, so the ranks' measured phases can be compared.
struct RankResult {
  int rank = 0;
  int64_t pid = 0;
  std::vector<double> seconds;  // per measured batch
  double resident_before = 0, resident_after = 0;  // mean fraction of the files cached (cold only)
  int64_t ready_ns = 0;                            // warm-up done, waiting for the others
  int64_t start_ns = 0, end_ns = 0;                // the measured phase
};

json to_json(const RankResult& r) {
  return {{"rank", r.rank},         {"pid", r.pid},       {"seconds", r.seconds},
          {"resident_before", r.resident_before}, {"resident_after", r.resident_after},
          {"ready_ns", r.ready_ns}, {"start_ns", r.start_ns}, {"end_ns", r.end_ns}};
}

RankResult rank_from_json(const json& j) {
  RankResult r;
  r.rank = j.at("rank").get<int>();
  r.pid = j.at("pid").get<int64_t>();
  r.seconds = j.at("seconds").get<std::vector<double>>();
  r.resident_before = j.at("resident_before").get<double>();
  r.resident_after = j.at("resident_after").get<double>();
  r.ready_ns = j.at("ready_ns").get<int64_t>();
  r.start_ns = j.at("start_ns").get<int64_t>();
  r.end_ns = j.at("end_ns").get<int64_t>();
  return r;
}

// The dataset the ranks read: the real one, or "synthetic" with the real one's input shape,
// classes and size (generated in memory: what the pipeline costs without any file).
DatasetSpec source_spec(const DatasetSpec& real, const std::string& source, json& description) {
  const auto ds = open_dataset(real);
  const auto descs = ds->sample_descs();
  const auto input = descs.find(kDataInput);
  D5_CHECK_ARG(input != descs.end(), "dataset '{}' has no '{}' tensor to time", real.name, kDataInput);
  description = {{"format", real.name},         {"name", ds->name()},
                 {"size", ds->size()},          {"classes", ds->classes()},
                 {"input_shape", input->second.shape.dims()},
                 {"input_dtype", std::string(to_string(input->second.dtype))}};
  if (source == "real") return real;
  D5_CHECK_ARG(input->second.dtype == DType::f32,
               "--source synthetic generates f32 inputs; dataset '{}' has {} inputs: compare it with its real "
               "source only",
               real.name, to_string(input->second.dtype));
  D5_CHECK_ARG(ds->classes() >= 1, "--source synthetic needs a dataset with classes; '{}' has none", real.name);
  DatasetSpec s;
  s.name = "synthetic";
  s.split = real.split;
  s.seed = real.seed;
  s.options = {{"shape", fmt::format("{}", fmt::join(input->second.shape.dims(), "x"))},
               {"classes", std::to_string(ds->classes())},
               {"samples", std::to_string(ds->size())}};
  description["synthetic_options"] = s.options;
  return s;
}

// This rank's index batches, warm-up ones first: batch g of one global stream (ordered or
// shuffled, epoch after epoch) belongs to rank g % ranks, as a distributed sampler deals them.
std::vector<std::vector<int64_t>> rank_batches(int64_t size, const BenchArgs& a, int rank, uint64_t seed) {
  D5_CHECK_ARG(size >= a.batch, "the dataset has {} samples, fewer than one batch of {}", size, a.batch);
  std::unique_ptr<Sampler> sampler;
  if (a.order == "shuffled")
    sampler = std::make_unique<ShuffleSampler>(size, a.batch, true, seed);
  else
    sampler = std::make_unique<OrderedSampler>(size, a.batch, true, seed);
  std::vector<std::vector<int64_t>> mine;
  const int64_t total = (a.warmup + a.batches) * a.ranks;
  for (int64_t g = 0; g < total; ++g) {
    auto b = sampler->next();
    if (b.empty()) {
      sampler->reset();
      b = sampler->next();
    }
    if (g % a.ranks == rank) mine.push_back(std::move(b));
  }
  return mine;
}

// Opens the dataset, fetches the warm-up batches, calls `ready` (which returns when every rank may
// start), then times each measured batch's fetch. A cold cache drops the files' pages before every
// batch, outside the timed region.
RankResult measure_rank(const BenchArgs& a, const DatasetSpec& spec, const std::vector<std::string>& files, int rank,
                        const std::function<void()>& ready) {
  const auto ds = open_dataset(spec);
  const auto batches = rank_batches(ds->size(), a, rank, spec.seed);
  const bool cold = a.cache == "cold";
  RankResult r;
  r.rank = rank;
  r.pid = ::getpid();
  const auto fetch = [&](const std::vector<int64_t>& idx) {
    if (cold) {
      for (const auto& f : files) drop_from_page_cache(f);
      r.resident_before += page_cache_residency(files).fraction();
    }
    const int64_t t0 = wall_now_ns();
    const Batch b = ds->fetch(idx);
    const int64_t t1 = wall_now_ns();
    if (cold) r.resident_after += page_cache_residency(files).fraction();
    const auto in = b.find(kDataInput);
    D5_CHECK(in != b.end() && in->second.shape().rank() >= 1 &&
                 in->second.shape()[0] == static_cast<int64_t>(idx.size()),
             Internal, "dataset '{}' returned a batch without {} '{}' rows", spec.name, idx.size(), kDataInput);
    return static_cast<double>(t1 - t0) * 1e-9;
  };
  for (int64_t i = 0; i < a.warmup; ++i) fetch(batches[static_cast<size_t>(i)]);
  r.resident_before = r.resident_after = 0;
  r.ready_ns = wall_now_ns();
  ready();
  r.start_ns = wall_now_ns();
  for (size_t i = static_cast<size_t>(a.warmup); i < batches.size(); ++i) r.seconds.push_back(fetch(batches[i]));
  r.end_ns = wall_now_ns();
  const auto n = static_cast<double>(r.seconds.size());
  r.resident_before /= n;
  r.resident_after /= n;
  return r;
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

std::string read_all(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return s;
    s.append(buf, static_cast<size_t>(n));
  }
}

[[noreturn]] void rethrow_rank_error(int rank, const json& j) {
  const std::string kind = j.value("kind", std::string("Internal"));
  ErrorKind k = ErrorKind::Internal;
  for (ErrorKind e : {ErrorKind::InvalidArgument, ErrorKind::Unimplemented, ErrorKind::NotBuilt,
                      ErrorKind::FormatError, ErrorKind::IoError, ErrorKind::Internal})
    if (to_string(e) == kind) k = e;
  const std::string message = fmt::format("rank {}: {}", rank, j.value("error", std::string("failed")));
  rethrow_with_message(Error(k, message), message);
}

// One process per rank, each opening the dataset itself; all of them fetch their warm-up batches,
// then start the measured phase together (a pipe whose closing releases every rank at once).
std::vector<RankResult> measure_ranks(const BenchArgs& a, const DatasetSpec& spec, const std::vector<std::string>& files) {
  if (a.ranks == 1) return {measure_rank(a, spec, files, 0, [] {})};
  int start[2];
  D5_CHECK(::pipe(start) == 0, IoError, "cannot create a pipe: {}", std::strerror(errno));
  std::vector<pid_t> pids;
  std::vector<int> ready_fds, result_fds;
  std::cout.flush();
  std::cerr.flush();
  for (int rank = 0; rank < a.ranks; ++rank) {
    int ready[2], result[2];
    D5_CHECK(::pipe(ready) == 0 && ::pipe(result) == 0, IoError, "cannot create a pipe: {}", std::strerror(errno));
    const pid_t pid = ::fork();
    D5_CHECK(pid >= 0, IoError, "cannot start reading process {}: fork failed: {}", rank, std::strerror(errno));
    if (pid == 0) {
      ::close(start[1]);
      ::close(ready[0]);
      ::close(result[0]);
      for (int fd : ready_fds) ::close(fd);
      for (int fd : result_fds) ::close(fd);
      json out;
      try {
        out = to_json(measure_rank(a, spec, files, rank, [&] {
          write_all(ready[1], "r");
          ::close(ready[1]);
          char c;
          while (::read(start[0], &c, 1) < 0 && errno == EINTR) {
          }
        }));
      } catch (const Error& e) {
        out = {{"error", e.what()}, {"kind", std::string(to_string(e.kind()))}};
      } catch (const std::exception& e) {
        out = {{"error", e.what()}, {"kind", "Internal"}};
      }
      write_all(result[1], out.dump());
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(result[1]);
    pids.push_back(pid);
    ready_fds.push_back(ready[0]);
    result_fds.push_back(result[0]);
  }
  ::close(start[0]);
  // A rank that failed before it was ready closes its end: the read returns at once.
  for (int fd : ready_fds) {
    read_all(fd);
    ::close(fd);
  }
  ::close(start[1]);
  std::vector<std::string> outputs;
  for (int fd : result_fds) {
    outputs.push_back(read_all(fd));
    ::close(fd);
  }
  for (const pid_t pid : pids) ::waitpid(pid, nullptr, 0);
  std::vector<RankResult> ranks;
  for (int rank = 0; rank < a.ranks; ++rank) {
    const std::string& text = outputs[static_cast<size_t>(rank)];
    D5_CHECK(!text.empty(), Internal, "reading process {} ended without a result (killed?)", rank);
    const json j = json::parse(text);
    if (j.contains("error")) rethrow_rank_error(rank, j);
    ranks.push_back(rank_from_json(j));
  }
  return ranks;
}

// Writes the generated image set the options ask for into a fresh directory, removed on exit.
class GeneratedImages {
 public:
  GeneratedImages(const BenchArgs& a, DatasetSpec& spec) {
    if (a.generate_images == 0) return;
    D5_CHECK_ARG(spec.name == "image-tar" || spec.name == "tfrecord",
                 "--generate-images writes an image-tar or a tfrecord set, not '{}'", spec.name);
    D5_CHECK_ARG(spec.data_dir.empty(), "--generate-images writes the data itself: leave out --data-dir (given '{}')",
                 spec.data_dir);
    const fs::path base = a.work_dir.empty() ? fs::temp_directory_path() : fs::path(a.work_dir);
    dir_ = make_unique_directory(base.string(), "d5-data-bench");
    SyntheticImagesOptions o;
    o.images = a.generate_images;
    o.side = a.image_size;
    o.quality = a.image_quality;
    o.classes = a.image_classes;
    o.seed = spec.seed;
    const int64_t t0 = wall_now_ns();
    const SyntheticImageFile f = spec.name == "image-tar"
                                     ? write_synthetic_image_tar((fs::path(dir_) / "train.tar").string(), o)
                                     : write_synthetic_image_tfrecord((fs::path(dir_) / "train.tfrecord").string(), o);
    spec.data_dir = f.path;
    description_ = {{"images", f.images},         {"side", o.side},
                    {"quality", o.quality},       {"classes", o.classes},
                    {"jpeg_bytes", f.jpeg_bytes}, {"file_bytes", f.file_bytes},
                    {"directory", base.string()}, {"write_seconds", static_cast<double>(wall_now_ns() - t0) * 1e-9}};
  }
  ~GeneratedImages() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  GeneratedImages(const GeneratedImages&) = delete;
  GeneratedImages& operator=(const GeneratedImages&) = delete;
  const json& description() const { return description_; }

 private:
  std::string dir_;
  json description_ = nullptr;
};

void check_args(const BenchArgs& a) {
  D5_CHECK_ARG(a.batch >= 1, "--batch must be >= 1, got {}", a.batch);
  D5_CHECK_ARG(a.batches >= 1, "--batches must be >= 1, got {}", a.batches);
  D5_CHECK_ARG(a.warmup >= 0, "--warmup must be >= 0, got {}", a.warmup);
  D5_CHECK_ARG(a.ranks >= 1 && a.ranks <= 256, "--ranks must be in [1, 256], got {}", a.ranks);
  D5_CHECK_ARG(a.target_ci > 0, "--target-ci must be > 0, got {}", a.target_ci);
  D5_CHECK_ARG(a.generate_images >= 0, "--generate-images must be >= 0, got {}", a.generate_images);
  D5_CHECK_ARG(!(a.cache == "cold" && a.source == "synthetic"),
               "--cache cold drops a dataset's files from the page cache; --source synthetic reads no file");
}

CaseResult bench_case(const BenchArgs& a, const DatasetSpec& spec, const std::vector<RankResult>& ranks,
                      const json& dataset, const json& generated, size_t files) {
  CaseResult c;
  c.name = fmt::format("{}/{}/{}/{}/ranks={}", a.ds.dataset, a.source, a.order, a.cache, a.ranks);
  c.level = "L2";
  c.params = {{"dataset", a.ds.dataset}, {"source", a.source}, {"order", a.order}, {"cache", a.cache},
              {"ranks", a.ranks},        {"batch", a.batch},   {"batches", a.batches}, {"split", spec.split},
              {"options", a.ds.set}};
  std::vector<double> seconds, per_s;
  json per_rank = json::array();
  double before = 0, after = 0;
  for (const auto& r : ranks) {
    seconds.insert(seconds.end(), r.seconds.begin(), r.seconds.end());
    json j = to_json(r);
    j.erase("seconds");
    j["median_s"] = summarize(r.seconds).median;
    per_rank.push_back(std::move(j));
    before += r.resident_before / static_cast<double>(ranks.size());
    after += r.resident_after / static_cast<double>(ranks.size());
  }
  for (double s : seconds) per_s.push_back(static_cast<double>(a.batch) / s);
  MetricRecord latency = metric_record("DatasetLatency", "s", seconds);
  latency.info = {{"source", "fetch"}, {"batch", a.batch}};
  c.metrics = {latency, metric_record("samples_per_s", "samples/s", per_s)};
  c.extra = {{"dataset", dataset}, {"per_rank", per_rank}, {"files", files}};
  if (!generated.is_null()) c.extra["generated"] = generated;

  RunOutcome o;
  o.warmup_runs = static_cast<int>(a.warmup);
  o.runs = static_cast<int>(seconds.size());
  o.seconds = 0;
  for (double s : seconds) o.seconds += s;
  o.ci_ratio = ci_half_width_ratio(seconds, 0.95);
  const bool tight = o.ci_ratio <= a.target_ci;
  o.validity = tight ? Validity::Valid : Validity::Invalid;
  o.reason = std::isfinite(o.ci_ratio)
                 ? fmt::format("CI ±{:.1f}% after {} batches{}", 100 * o.ci_ratio, o.runs,
                               tight ? "" : fmt::format(", wider than --target-ci {:.1f}%: more --batches narrow it",
                                                        100 * a.target_ci))
                 : fmt::format("no CI of the median from {} batches (at least 6 give one)", o.runs);
  c.outcome = o;
  if (a.cache == "cold") {
    c.extra["resident_before"] = before;
    c.extra["resident_after"] = after;
    if (before > 0.5) {
      c.state = CaseState::Mistrusted;
      c.detail = fmt::format("not a cold read: {:.0f}% of the files stayed in the page cache after dropping them "
                             "(a file system in memory, such as tmpfs, cannot drop its pages)",
                             100 * before);
    } else if (after < 1e-3) {
      c.detail = "the dataset reads its files when opened; a fetch reads none, so the page cache does not matter";
    }
  }
  return c;
}

std::string console_text(const CaseResult& c) {
  const json& d = c.extra["dataset"];
  const Summary& s = *c.metrics[0].summary;
  const Summary& t = *c.metrics[1].summary;
  std::string text = fmt::format("dataset   {} ({} source, split {}): {} samples, input {} {}\n",
                                 d["format"].get<std::string>(), c.params["source"].get<std::string>(),
                                 c.params["split"].get<std::string>(), d["size"].get<int64_t>(),
                                 d["input_dtype"].get<std::string>(), d["input_shape"].dump());
  if (c.extra.contains("generated")) {
    const json& g = c.extra["generated"];
    text += fmt::format("generated {} JPEGs of {}x{}, {:.1f} KiB each, {:.1f} MiB file, in {}\n",
                        g["images"].get<int64_t>(), g["side"].get<int>(), g["side"].get<int>(),
                        g["jpeg_bytes"].get<double>() / 1024.0 / g["images"].get<double>(),
                        g["file_bytes"].get<double>() / 1048576.0, g["directory"].get<std::string>());
  }
  text += fmt::format("batches   {} of {}, {} order, {} page cache, {} reading process{}\n",
                      c.params["batches"].get<int64_t>(), c.params["batch"].get<int64_t>(),
                      c.params["order"].get<std::string>(), c.params["cache"].get<std::string>(),
                      c.params["ranks"].get<int>(), c.params["ranks"].get<int>() == 1 ? "" : "es");
  const auto ci = [](const Summary& x, double f, const char* spec) {
    return x.median_ci.available
               ? fmt::format(fmt::runtime(std::string(spec) + " [" + spec + ", " + spec + "]"), x.median * f,
                             x.median_ci.lower * f, x.median_ci.upper * f)
               : fmt::format(fmt::runtime(std::string(spec) + " [no CI]"), x.median * f);
  };
  text += fmt::format("DatasetLatency  {} ms per batch (median [95% CI])\n", ci(s, 1e3, "{:.3f}"));
  text += fmt::format("throughput      {} samples/s\n", ci(t, 1.0, "{:.0f}"));
  if (c.extra.contains("resident_before"))
    text += fmt::format("page cache      {:.1f}% of the files resident before a batch, {:.1f}% after\n",
                        100 * c.extra["resident_before"].get<double>(), 100 * c.extra["resident_after"].get<double>());
  text += fmt::format("{}: {}\n", to_string(c.outcome->validity), c.outcome->reason);
  if (c.state != CaseState::Passed || !c.detail.empty())
    text += fmt::format("{}{}{}\n", to_string(c.state), c.detail.empty() ? "" : ": ", c.detail);
  return text;
}

int run_bench(const BenchArgs& a, const GlobalOptions& g) {
  check_args(a);
  DatasetSpec spec = dataset_spec(a.ds, g);
  const GeneratedImages generated(a, spec);
  json dataset;
  const DatasetSpec read = source_spec(spec, a.source, dataset);
  D5_CHECK_ARG(a.cache != "cold" || !spec.data_dir.empty(),
               "--cache cold drops the dataset's files from the page cache: name them with --data-dir (or "
               "--generate-images)");
  const std::vector<std::string> files = a.cache == "cold" ? dataset_files(spec.data_dir) : std::vector<std::string>{};
  D5_CHECK_ARG(a.cache != "cold" || !files.empty(), "--cache cold: '{}' holds no file to drop from the page cache",
               spec.data_dir);
  const std::vector<RankResult> ranks = measure_ranks(a, read, files);
  Results r;
  r.manifest = make_manifest(settings_from(g));
  // The download cache, where no --data-dir names the files, is the dataset's business.
  const size_t file_count = spec.data_dir.empty() ? 0 : dataset_files(spec.data_dir).size();
  r.cases.push_back(bench_case(a, spec, ranks, dataset, generated.description(), file_count));
  emit_text(console_text(r.cases[0]), to_json(r), a.out);
  return exit_code_for(r);
}

}  // namespace

void register_data_bench(CLI::App& data, const GlobalOptions& g, std::vector<Command>& subcommands) {
  auto* cmd = data.add_subcommand(
      "bench", "DatasetLatency: time to fetch a batch, real or synthetic, sequential or shuffled, warm or cold "
               "page cache, one or several reading processes (results file)");
  auto a = std::make_shared<BenchArgs>();
  add_dataset_options(*cmd, a->ds);
  cmd->add_option("--source", a->source, "real: the dataset's files; synthetic: generated inputs of the same shape")
      ->check(CLI::IsMember({"real", "synthetic"}))
      ->default_val("real");
  cmd->add_option("--order", a->order, "sequential: consecutive samples; shuffled: a seeded permutation")
      ->check(CLI::IsMember({"sequential", "shuffled"}))
      ->default_val("sequential");
  cmd->add_option("--cache", a->cache, "warm: as the OS left it; cold: drop the files' pages before every batch")
      ->check(CLI::IsMember({"warm", "cold"}))
      ->default_val("warm");
  cmd->add_option("--batch", a->batch, "Samples per batch")->default_val(64);
  cmd->add_option("--batches", a->batches, "Measured batches per reading process")->default_val(30);
  cmd->add_option("--warmup", a->warmup, "Batches fetched first, untimed, by every process")->default_val(2);
  cmd->add_option("--ranks", a->ranks, "Reading processes at once, each fetching every N-th batch")->default_val(1);
  cmd->add_option("--target-ci", a->target_ci, "VALID when the median's 95% CI half-width is within this fraction")
      ->default_val(0.05);
  cmd->add_option("--generate-images", a->generate_images,
                  "Write N photo-like JPEGs as the --dataset (image-tar or tfrecord) first, removed afterwards")
      ->default_val(0);
  cmd->add_option("--image-size", a->image_size, "Side of a generated image in pixels")->default_val(256);
  cmd->add_option("--image-quality", a->image_quality, "JPEG quality of the generated images")->default_val(90);
  cmd->add_option("--image-classes", a->image_classes, "Classes of the generated images")->default_val(8);
  cmd->add_option("--work-dir", a->work_dir,
                  "Where generated images go (default: the temporary directory; a cold cache needs a disk, not tmpfs)");
  add_output_options(*cmd, a->out);
  subcommands.push_back({cmd, [a, &g]() -> int { return run_bench(*a, g); }});
}

}  // namespace d5::cli
