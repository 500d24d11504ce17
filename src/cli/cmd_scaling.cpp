// d5 scaling: a training run on 1, 2, 4, ... ranks launched through mpirun: time, speedup,
// efficiency and bytes per rank, strong or weak (docs/scaling.md).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/core/error.h"
#include "deep500/dist/communication_volume.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/results.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;

struct ScalingOpts {
  OutputOptions out;
  std::string ranks = "1,2,4";  // parsed here: a vector option would swallow the "--" before the train options
  std::string mode = "strong";
  int64_t batch = 64;
  std::string dist = "dsgd";
  std::string launcher = D5_MPIEXEC_DEFAULT;
  std::vector<std::string> launcher_args;
  std::string csv;
  std::vector<std::string> train_args;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv with stdout and stderr into files under dir; returns the exit status (-signal when
// killed).
int run_to_files(const std::vector<std::string>& argv, const fs::path& dir) {
  const pid_t pid = fork();
  D5_CHECK(pid >= 0, IoError, "cannot start '{}': fork failed", argv[0]);
  if (pid == 0) {
    const int out = open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  D5_CHECK(!ec, IoError, "cannot find the d5 executable (/proc/self/exe): {}", ec.message());
  return p.string();
}

struct Point {
  int ranks = 0;
  int64_t per_rank_batch = 0;
  double time_s = 0;  // rank 0's training time
  CaseResult train;   // rank 0's case
};

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    D5_CHECK_ARG(used == item.size() && !item.empty() && n >= 1, "--ranks: '{}' is not a rank count (>= 1)", item);
    out.push_back(n);
  }
  D5_CHECK_ARG(!out.empty(), "--ranks lists at least one rank count, e.g. 1,2,4");
  return out;
}

// Each rank's communicated bytes per step, from the run's gathered per-rank metrics.
nlohmann::json bytes_per_rank(const CaseResult& train) {
  nlohmann::json out = nlohmann::json::array();
  const auto d = train.extra.find("distributed");
  if (d == train.extra.end() || !d->contains("ranks")) return out;
  for (const auto& r : (*d)["ranks"]) out.push_back(r.value("bytes_per_step", 0.0));
  return out;
}

// Rank 0's collective that carried the most bytes, with nccl-tests' bandwidths: algbw = bytes /
// time and busbw = algbw x the operation's bus factor on n ranks. A nonblocking collective has no
// time of its own (it overlaps the caller's work), so its bandwidths are null.
nlohmann::json collective_bandwidth(const CaseResult& train, int ranks) {
  const auto d = train.extra.find("distributed");
  if (d == train.extra.end() || !d->contains("ranks") || (*d)["ranks"].empty()) return nullptr;
  const nlohmann::json& collectives = (*d)["ranks"][0]["volume"]["collectives"];
  std::string op;
  int64_t bytes = -1;
  for (const auto& [name, c] : collectives.items()) {
    if (c.value("bytes", int64_t{0}) > bytes) op = name, bytes = c.value("bytes", int64_t{0});
  }
  if (op.empty()) return nullptr;
  const double time_s = collectives[op].value("time_s", 0.0);
  // device_bytes: the share a device library (NCCL) carried GPU to GPU; the rest went through MPI.
  nlohmann::json out = {{"collective", op}, {"bytes", bytes}, {"device_bytes", collectives[op].value("device_bytes", int64_t{0})},
                        {"time_s", time_s}, {"algbw", nullptr}, {"busbw", nullptr}};
  if (time_s > 0) {
    const double algbw = static_cast<double>(bytes) / time_s;
    out["algbw"] = algbw;
    out["busbw"] = algbw * CommunicationVolume::bus_factor(op, ranks);
  }
  return out;
}

// The communicator a run's ranks used ("mpi", "NCCL 2.28.9 + mpi"), from d5 train's params.
std::string communicator_of(const CaseResult& train) {
  return train.params.value("dist", nlohmann::json::object()).value("communicator", "");
}

std::string gigabytes_per_second(const nlohmann::json& bandwidth, const char* key) {
  if (bandwidth.is_null() || bandwidth[key].is_null()) return "-";
  return fmt::format("{:.3f}", bandwidth[key].get<double>() / 1e9);
}

int run_scaling(const ScalingOpts& o, const GlobalOptions& g) {
  const std::vector<int> rank_counts = parse_ranks(o.ranks);
  for (const auto& a : o.train_args) {
    D5_CHECK_ARG(a != "--batch" && a != "--dist" && a != "--format" && a != "-o" && a != "--output",
                 "'{}' is set by d5 scaling itself; give --batch and --dist to d5 scaling", a);
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("d5-scaling-{}", getpid());
  fs::create_directories(dir);
  // Removed however this function ends: a failed run's output is quoted in the error instead.
  struct RemovedAtExit {
    fs::path dir;
    ~RemovedAtExit() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } const scratch{dir};
  const std::string d5 = self_exe();
  std::vector<Point> points;
  for (int n : rank_counts) {
    // Strong scaling splits the global --batch over the ranks; weak scaling keeps --batch per rank.
    D5_CHECK_ARG(o.mode == "weak" || o.batch % n == 0,
                 "strong scaling splits --batch {} over the ranks: {} ranks do not divide it", o.batch, n);
    Point p;
    p.ranks = n;
    p.per_rank_batch = o.mode == "strong" ? o.batch / n : o.batch;
    const fs::path result = dir / fmt::format("ranks{}.json", n);
    std::vector<std::string> argv = {o.launcher, "-n", std::to_string(n)};
    argv.insert(argv.end(), o.launcher_args.begin(), o.launcher_args.end());
    argv.insert(argv.end(), {d5, "--threads", std::to_string(g.threads), "--seed", std::to_string(g.seed), "train"});
    argv.insert(argv.end(), o.train_args.begin(), o.train_args.end());
    argv.insert(argv.end(), {"--batch", std::to_string(p.per_rank_batch), "--dist", o.dist, "--format", "json", "-o",
                             result.string()});
    const int rc = run_to_files(argv, dir);
    const std::string err = read_text(dir / "err");
    D5_CHECK(rc == 0 && fs::exists(result), IoError, "the run on {} ranks failed (exit {}): {}\ncommand: {}", n, rc,
             err.substr(0, 2000), fmt::join(argv, " "));
    Results r = read_results(result.string());
    D5_CHECK(r.cases.size() == 1, FormatError, "the run on {} ranks wrote {} cases, not 1", n, r.cases.size());
    p.train = r.cases[0];
    p.time_s = p.train.extra.value("training_time_s", 0.0);
    points.push_back(std::move(p));
  }

  Results res;
  const Point& base = points.front();
  std::ostringstream console, csv;
  const std::string communicator = communicator_of(base.train);
  console << fmt::format("{} scaling, --dist {}, {} batch {}, communicator {}\n", o.mode, o.dist,
                         o.mode == "strong" ? "global" : "per-rank", o.batch, communicator);
  console << fmt::format("{:>6} {:>10} {:>12} {:>9} {:>11} {:>16} {:>11} {:>12} {:>11} {:>11}\n", "ranks",
                         "batch/rank", "time s", "speedup", "efficiency", "bytes/rank/step", "imbalance", "collective",
                         "algbw GB/s", "busbw GB/s");
  csv << "ranks,per_rank_batch,time_s,speedup,efficiency,bytes_per_rank_per_step,compute_imbalance,collective,algbw,"
         "busbw\n";
  for (const Point& p : points) {
    // Strong: the same work in less time. Weak: N times the work in about the same time;
    // speedup is then the throughput ratio. Both relative to the first rank count listed.
    const double ratio = p.time_s > 0 ? base.time_s / p.time_s : 0;
    const double scale = static_cast<double>(p.ranks) / base.ranks;
    const double speedup = o.mode == "strong" ? ratio : ratio * scale;
    const double efficiency = speedup / scale;
    const nlohmann::json summary = p.train.extra["distributed"]["summary"];
    const double bytes = summary["bytes_per_step"].value("mean", 0.0);
    const double imbalance = summary["compute_s"].value("imbalance", 0.0);
    const nlohmann::json bandwidth = collective_bandwidth(p.train, p.ranks);
    const std::string op = bandwidth.is_null() ? "-" : bandwidth["collective"].get<std::string>();
    console << fmt::format("{:>6} {:>10} {:>12.4f} {:>9.3f} {:>11.3f} {:>16.0f} {:>11.3f} {:>12} {:>11} {:>11}\n",
                           p.ranks, p.per_rank_batch, p.time_s, speedup, efficiency, bytes, imbalance, op,
                           gigabytes_per_second(bandwidth, "algbw"), gigabytes_per_second(bandwidth, "busbw"));
    auto csv_number = [&](const char* key) {
      return bandwidth.is_null() || bandwidth[key].is_null() ? std::string() : fmt::format("{}", bandwidth[key].get<double>());
    };
    csv << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", p.ranks, p.per_rank_batch, p.time_s, speedup, efficiency,
                       bytes, imbalance, bandwidth.is_null() ? "" : op, csv_number("algbw"), csv_number("busbw"));
    CaseResult c;
    // The shape d5 report's Scaling section reads (docs/report.md): the series is the name
    // without its ranks=N element, params.scaling says strong or weak, bytes_per_rank per rank.
    c.name = fmt::format("scaling/{}/{}/ranks={}", o.dist, o.mode, p.ranks);
    c.level = "L3";
    c.backend = p.train.backend;
    c.params = {{"mode", o.mode}, {"ranks", p.ranks}, {"per_rank_batch", p.per_rank_batch},
                {"global_batch", p.per_rank_batch * p.ranks}, {"dist", o.dist}, {"scaling", o.mode},
                {"communicator", communicator_of(p.train)}};
    c.metrics = p.train.metrics;  // rank 0's step_time, throughput, ... with their statistics
    c.extra = {{"time_s", p.time_s}, {"speedup", speedup}, {"efficiency", efficiency},
               {"bytes_per_rank_per_step", bytes}, {"bytes_per_rank", bytes_per_rank(p.train)},
               {"compute_imbalance", imbalance}, {"collective_bandwidth", bandwidth},
               {"distributed", p.train.extra["distributed"]}};
    res.cases.push_back(std::move(c));
  }
  res.manifest = make_manifest(settings_from(g));
  res.manifest["extra"] = {{"train_args", o.train_args}, {"launcher", o.launcher}, {"launcher_args", o.launcher_args}};
  if (!o.csv.empty()) {
    std::ofstream f(o.csv);
    D5_CHECK(f.good(), IoError, "cannot write --csv '{}'", o.csv);
    f << csv.str();
  }
  emit_text(console.str(), to_json(res), o.out);
  return exit_code_for(res);
}

}  // namespace

Command register_scaling(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("scaling",
                                 "Scaling experiment: d5 train on several rank counts through mpirun; time, speedup, "
                                 "efficiency, bytes per rank");
  auto o = std::make_shared<ScalingOpts>();
  cmd->add_option("--ranks", o->ranks, "Rank counts, comma separated (the first is the baseline)")
      ->default_val("1,2,4");
  cmd->add_option("--mode", o->mode, "strong: --batch is the global batch; weak: --batch is per rank")
      ->check(CLI::IsMember({"strong", "weak"}))
      ->default_val("strong");
  cmd->add_option("--batch", o->batch, "Global (strong) or per-rank (weak) batch")
      ->check(CLI::PositiveNumber)
      ->default_val(64);
  cmd->add_option("--dist", o->dist, "Distributed scheme (see d5 train --dist)")->default_val("dsgd");
  cmd->add_option("--mpirun", o->launcher, "The MPI launcher")->default_val(D5_MPIEXEC_DEFAULT);
  cmd->add_option("--mpirun-arg", o->launcher_args,
                  "An argument for the launcher (repeatable), e.g. --mpirun-arg=--oversubscribe")
      ->allow_extra_args(false);
  cmd->add_option("--csv", o->csv, "Also write the table as CSV (plot data)");
  cmd->add_option("train_args", o->train_args, "d5 train options after --, without --batch, --dist and output")
      ->required();
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_scaling(*o, g); }};
}

}  // namespace d5::cli
