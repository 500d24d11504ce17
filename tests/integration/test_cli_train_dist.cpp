// Integration tests of `d5 train --dist`: the real binary under the MPI launcher. Two ranks with
// batch b end with the parameters one process reaches with batch 2b, for every scheme that
// reduces to DSGD with plain SGD; only rank 0 writes, with every rank's metrics; a killed rank
// ends the whole run with an error naming it instead of a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "deep500/backends/builtin.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/op/op_registry.h"
#include "process.h"

namespace d5::test {
namespace {

namespace fs = std::filesystem;

class CliTrainDist : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_operators();
    set_mpi_launcher_environment();
  }
  std::string path(const std::string& name) const { return dir_.file(name); }

  static std::vector<std::string> train_args(int64_t batch, int64_t steps, const std::vector<std::string>& more) {
    std::vector<std::string> a = {"train", "--model", "mlp", "--dataset", "synthetic-learnable", "--set", "shape=16",
                                  "--set", "classes=4", "--set", "samples=256", "--batch", std::to_string(batch),
                                  "--steps", std::to_string(steps), "--sampler", "shuffle", "--lr", "0.1",
                                  "--no-test", "--prefetch", "0"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  static ProcessResult mpirun(int ranks, const std::vector<std::string>& d5_args) {
    std::vector<std::string> a = {"-n", std::to_string(ranks), d5_binary()};
    a.insert(a.end(), d5_args.begin(), d5_args.end());
    return run_process(D5_MPIEXEC, a);
  }
  TempDir dir_{"d5-train-dist"};
};

// Largest relative difference of two saved models' parameters.
double model_difference(const std::string& a, const std::string& b) {
  const Network na = import_onnx_file(a), nb = import_onnx_file(b);
  double worst = 0;
  for (const auto& p : na.get_params()) {
    const Tensor x = na.fetch_tensor(p), y = nb.fetch_tensor(p);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double u = x.span<float>()[static_cast<size_t>(i)], v = y.span<float>()[static_cast<size_t>(i)];
      worst = std::max(worst, std::fabs(u - v) / (1e-3 + std::fabs(u)));
    }
  }
  return worst;
}

TEST_F(CliTrainDist, EverySchemeOnTwoRanksEqualsOneProcessWithTheGlobalBatch) {
  auto r = run_d5(train_args(16, 12, {"--save-model", path("one.onnx")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // With plain SGD on two ranks every scheme reduces to DSGD: ssgd with staleness 0, mavg every
  // step, dpsgd (the one neighbour is everyone), sparse keeping every element.
  for (const std::string scheme : {"dsgd", "pssgd", "ssgd", "mavg", "dpsgd", "sparse"}) {
    const std::string model = path(scheme + ".onnx");
    std::vector<std::string> more = {"--dist", scheme, "--save-model", model};
    if (scheme == "sparse") more.insert(more.end(), {"--topk", "1"});  // its own option only
    r = mpirun(2, train_args(8, 12, more));
    ASSERT_EQ(r.exit_code, 0) << scheme << ": " << r.err << r.out;
    // 12 steps of float sums in another order: a few ulps each.
    EXPECT_LT(model_difference(path("one.onnx"), model), 1e-5) << scheme;
  }
  // And the parameters moved: a 3-step run differs.
  r = run_d5(train_args(16, 3, {"--save-model", path("short.onnx")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(model_difference(path("one.onnx"), path("short.onnx")), 1e-3);
}

// DSGD on the torch executor: its backward events see gradients only while they run, so they are
// reduced after backprop (overlapping them crashed); two ranks still equal one process.
TEST_F(CliTrainDist, DsgdOnTheTorchExecutorEqualsOneProcess) {
  auto r = run_d5(train_args(16, 12, {"--backend", "torch", "--save-model", path("one.onnx")}));
  if (r.exit_code == kExitNotBuilt) GTEST_SKIP() << "no torch backend: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = mpirun(2, train_args(8, 12, {"--backend", "torch", "--dist", "dsgd", "--save-model", path("dsgd.onnx")}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_LT(model_difference(path("one.onnx"), path("dsgd.onnx")), 1e-5);
}

TEST_F(CliTrainDist, RankZeroWritesEveryRanksMetrics) {
  const auto r = mpirun(3, train_args(8, 5, {"--dist", "dsgd", "--bucket-mb", "0", "--format", "json", "-o",
                                             path("r.json"), "--save-model", path("m.onnx")}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.err.find("wrote"), r.err.rfind("wrote")) << "only rank 0 writes: " << r.err;
  const auto j = nlohmann::json::parse(read_file(path("r.json")));
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["level"], "L3");
  EXPECT_EQ(c["params"]["dist"]["scheme"], "dsgd");
  EXPECT_EQ(c["params"]["dist"]["global_batch"], 24);
  // dsgd's own options, the given one and the defaults.
  EXPECT_EQ(c["params"]["dist"]["options"],
            (nlohmann::json{{"bucket_mb", 0.0}, {"fuse_kb", 128.0}, {"overlap", 1.0}}));
  const auto& ranks = c["extra"]["distributed"]["ranks"];
  ASSERT_EQ(ranks.size(), 3u);
  // Every rank allreduces the model's gradient bytes every step, one call per parameter tensor.
  const Network net = import_onnx_file(path("m.onnx"));
  int64_t grad_bytes = 0, tensors = 0;
  for (const auto& p : net.get_params()) {
    grad_bytes += static_cast<int64_t>(net.fetch_tensor(p).bytes());
    ++tensors;
  }
  for (size_t rk = 0; rk < 3; ++rk) {
    EXPECT_EQ(ranks[rk]["rank"], static_cast<int>(rk));
    EXPECT_EQ(ranks[rk]["steps"], 5);
    // The first step reduces after backprop (blocking) to learn the order; later ones overlap.
    int64_t bytes = 0, calls = 0;
    for (const char* kind : {"allreduce", "iallreduce"}) {
      const auto& v = ranks[rk]["volume"]["collectives"];
      if (!v.contains(kind)) continue;
      bytes += v[kind]["bytes"].get<int64_t>();
      calls += v[kind]["calls"].get<int64_t>();
    }
    EXPECT_EQ(bytes, 5 * grad_bytes) << "rank " << rk;
    EXPECT_EQ(calls, 5 * tensors) << "rank " << rk;
    EXPECT_GT(ranks[rk]["communication_s"].get<double>(), 0);
  }
  EXPECT_EQ(c["extra"]["distributed"]["summary"]["ranks"], 3);
  EXPECT_TRUE(c["extra"]["distributed"]["summary"]["compute_s"].contains("imbalance"));
}

// Stop decisions that depend on one rank (its clock, its test accuracy) are rank 0's, shared by
// broadcast: every rank stops at the same step, and none is left waiting in a collective.
TEST_F(CliTrainDist, TimeLimitAndTargetAccuracyStopEveryRankAtTheSameStep) {
  auto r = mpirun(2, {"train", "--model", "mlp", "--dataset", "synthetic-learnable", "--set", "shape=16", "--set",
                      "classes=4", "--set", "samples=256", "--batch", "8", "--lr", "0.1", "--prefetch", "0",
                      "--no-test", "--dist", "dsgd", "--time-limit", "0.3", "--format", "json", "-o", path("t.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(read_file(path("t.json")));
  auto c = j["cases"][0];
  EXPECT_EQ(c["extra"]["stop_reason"], "time_limit");
  auto ranks = c["extra"]["distributed"]["ranks"];
  EXPECT_GT(ranks[0]["steps"].get<int64_t>(), 0);
  EXPECT_EQ(ranks[0]["steps"], ranks[1]["steps"]);
  EXPECT_GE(ranks[0]["training_time_s"].get<double>(), 0.3);
  // One byte per step from rank 0 carries the decision, and is counted.
  EXPECT_GE(ranks[1]["volume"]["collectives"]["broadcast"]["calls"].get<int64_t>(), ranks[1]["steps"].get<int64_t>());

  // Model averaging: the replicas' parameters differ between averages, so their test accuracies
  // do too; rank 0's decides, and every rank exits 0 when rank 0 reached the target.
  r = mpirun(3, {"train", "--model", "mlp", "--dataset", "synthetic-learnable", "--set", "shape=16", "--set",
                 "classes=4", "--set", "samples=256", "--batch", "8", "--lr", "0.1", "--prefetch", "0",
                 "--test-split", "test", "--test-every-steps", "7", "--dist", "mavg", "--avg-every", "3",
                 "--target-accuracy", "0.4", "--epochs", "40", "--format", "json", "-o", path("a.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(read_file(path("a.json")));
  c = j["cases"][0];
  EXPECT_EQ(c["extra"]["stop_reason"], "target");
  ranks = c["extra"]["distributed"]["ranks"];
  EXPECT_EQ(ranks[0]["steps"], ranks[1]["steps"]);
  EXPECT_EQ(ranks[0]["steps"], ranks[2]["steps"]);
  EXPECT_LT(ranks[0]["epochs_completed"].get<int64_t>(), 40) << "stopped by the target, not the epochs";
}

TEST_F(CliTrainDist, SeveralRanksWithoutASchemeAreRefused) {
  const auto r = mpirun(2, train_args(8, 2, {}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--dist"), std::string::npos) << r.err;
}

// A scheme takes its own options only; options without a scheme are refused before MPI starts.
TEST_F(CliTrainDist, AnotherSchemesOptionIsRefused) {
  auto r = mpirun(1, train_args(8, 2, {"--dist", "ssgd", "--topk", "0.1"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("distributed scheme 'ssgd' takes no option 'topk' (it is an option of sparse)"),
            std::string::npos)
      << r.err;
  r = run_d5(train_args(8, 2, {"--staleness", "2"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("distributed scheme options (staleness) need --dist"), std::string::npos) << r.err;
}

// --comm: host tensors go through MPI under auto, and the result says which communicator ran and
// why; --comm nccl is refused alike on every rank when NCCL cannot serve them, naming why (this
// machine's case: no NCCL in the build, no GPU, or the ranks sharing its one GPU), and taken on a
// node whose ranks get a GPU each; --comm without --dist is refused.
TEST_F(CliTrainDist, TheCommunicatorChoiceIsRecordedAndDeviceLibrariesAreRefusedWithTheirReasons) {
  auto r = mpirun(2, train_args(8, 2, {"--dist", "dsgd", "--format", "json", "-o", path("c.json")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(path("c.json")));
  const auto& dist = j["cases"][0]["params"]["dist"];
  EXPECT_EQ(dist["communicator"], "mpi");
  EXPECT_EQ(dist["communicator_choice"], "the executor's tensors are in host memory");
  EXPECT_EQ(j["cases"][0]["extra"]["distributed"]["ranks"][0]["volume"]["collectives"]["allreduce"]["device_calls"], 0);

  r = mpirun(2, train_args(8, 2, {"--dist", "dsgd", "--comm", "nccl", "--format", "json", "-o", path("n.json")}));
  if (r.exit_code == 0) {
    // A node of several GPUs: d5 binds each rank to its own, and NCCL serves them.
    const auto n = nlohmann::json::parse(read_file(path("n.json")));
    EXPECT_EQ(n["cases"][0]["params"]["dist"]["communicator"].get<std::string>().rfind("NCCL ", 0), 0u);
    EXPECT_EQ(n["cases"][0]["params"]["dist"]["communicator_choice"], "--comm nccl");
  } else if (r.err.find("built without NCCL") != std::string::npos) {
    EXPECT_EQ(r.exit_code, 6) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 3) << r.err;
    // Every rank refuses alike; which rank's message arrives before MPI_Abort ends the others is
    // the launcher's (MPICH's Hydra may cut rank 0 short).
    EXPECT_NE(r.err.find(" error: NCCL cannot serve these ranks: "), std::string::npos) << r.err;
    const bool gpu = r.err.find("share GPU GPU-") != std::string::npos;
    EXPECT_TRUE(gpu || r.err.find("no CUDA device on rank(s) 0, 1") != std::string::npos) << r.err;
  }

  // A CUDA-aware MPI only where the library says it is one (CI's Open MPI is built without CUDA).
  r = mpirun(2, train_args(8, 2, {"--dist", "dsgd", "--comm", "cuda-mpi", "--format", "json", "-o", path("m.json")}));
  if (r.exit_code == 0) {
    const auto m = nlohmann::json::parse(read_file(path("m.json")));
    EXPECT_EQ(m["cases"][0]["params"]["dist"]["communicator"], "CUDA-aware MPI + mpi");
    EXPECT_EQ(m["cases"][0]["params"]["dist"]["communicator_choice"], "--comm cuda-mpi");
  } else if (r.err.find("needs both MPI and the CUDA backend") != std::string::npos) {
    EXPECT_EQ(r.exit_code, 6) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find(" error: a CUDA-aware MPI cannot serve these ranks: "), std::string::npos) << r.err;
    const bool refused_for_mpi = r.err.find("the MPI library is not CUDA-aware on rank(s) 0, 1 (") != std::string::npos;
    const bool refused_for_gpu = r.err.find("no CUDA device on rank(s) 0, 1") != std::string::npos;
    EXPECT_TRUE(refused_for_mpi || refused_for_gpu) << r.err;
  }

  r = run_d5(train_args(8, 2, {"--comm", "mpi"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("distributed scheme options (comm) need --dist"), std::string::npos) << r.err;
}

// Only rank 0 writes the checkpoint, so an unwritable path fails rank 0 alone while rank 1 waits
// in the gathering of metrics: d5 must end it (MPI_Abort), keep the error's exit code and name
// the rank.
TEST_F(CliTrainDist, AnErrorOnOneRankEndsEveryRank) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = mpirun(2, train_args(8, 3, {"--dist", "dsgd", "--checkpoint", path("no-such-dir/ck")}));
  // Seconds when idle; the bound only catches a hang, with room for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 4) << r.err;  // IoError
  EXPECT_NE(r.err.find("d5: rank 0 error: cannot write"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ending every rank"), std::string::npos) << r.err;
}

// d5 scaling launches the runs itself and derives speedup and efficiency from their times.
TEST_F(CliTrainDist, ScalingLaunchesEveryRankCountAndComputesEfficiency) {
  const auto r = run_d5({"--threads", "1", "scaling", "--ranks", "1,2", "--mode", "weak", "--batch", "8", "--csv",
                         path("s.csv"), "--format", "json", "-o", path("s.json"), "--", "--model", "mlp", "--dataset",
                         "synthetic-learnable", "--set", "shape=16", "--set", "classes=4", "--set", "samples=256",
                         "--steps", "6", "--no-test", "--prefetch", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(read_file(path("s.json")));
  ASSERT_EQ(j["cases"].size(), 2u);
  const auto& one = j["cases"][0];
  const auto& two = j["cases"][1];
  EXPECT_EQ(one["params"]["ranks"], 1);
  EXPECT_EQ(two["params"]["ranks"], 2);
  EXPECT_EQ(two["params"]["per_rank_batch"], 8);
  EXPECT_EQ(two["params"]["global_batch"], 16);
  const double t1 = one["extra"]["time_s"], t2 = two["extra"]["time_s"];
  ASSERT_GT(t1, 0);
  ASSERT_GT(t2, 0);
  // Weak scaling: twice the work; speedup is the throughput ratio, efficiency t1 / t2.
  EXPECT_NEAR(two["extra"]["speedup"].get<double>(), 2 * t1 / t2, 1e-9);
  EXPECT_NEAR(two["extra"]["efficiency"].get<double>(), t1 / t2, 1e-9);
  EXPECT_EQ(two["extra"]["distributed"]["ranks"].size(), 2u);
  EXPECT_GT(two["extra"]["bytes_per_rank_per_step"].get<double>(), 0);
  EXPECT_EQ(count_lines(read_file(path("s.csv"))), 3);
  // The cases have the shape d5 report's Scaling section reads (docs/report.md).
  EXPECT_EQ(two["name"], "scaling/dsgd/weak/ranks=2");
  EXPECT_EQ(two["params"]["scaling"], "weak");
  ASSERT_EQ(two["extra"]["bytes_per_rank"].size(), 2u);
  for (const auto& b : two["extra"]["bytes_per_rank"]) EXPECT_GT(b.get<double>(), 0);
  // dsgd overlaps its allreduces with backprop: nonblocking, no time of their own, no bandwidth.
  EXPECT_EQ(two["extra"]["collective_bandwidth"]["collective"], "iallreduce");
  EXPECT_TRUE(two["extra"]["collective_bandwidth"]["busbw"].is_null());
  // Strong scaling refuses a batch the ranks do not divide.
  // (--ranks last before "--": the train options still reach the runs.)
  // Its scratch folder (the runs' results and output) is removed when it fails after a run, too.
  const std::string scratch = path("tmp");
  std::filesystem::create_directories(scratch);
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string saved = tmpdir ? tmpdir : "";
  setenv("TMPDIR", scratch.c_str(), 1);
  const auto bad = run_d5({"scaling", "--batch", "8", "--ranks", "1,3", "--", "--model", "mlp", "--dataset",
                           "synthetic", "--steps", "1"});
  if (tmpdir) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("3 ranks do not divide it"), std::string::npos) << bad.err;
  EXPECT_TRUE(std::filesystem::is_empty(scratch)) << std::filesystem::directory_iterator(scratch)->path();
}

// Blocking allreduces (--no-overlap) have a time, and so nccl-tests' bandwidths: algbw = bytes /
// time from rank 0's volume, busbw = algbw x 2(n-1)/n (0 on one rank, as nccl-tests prints).
TEST_F(CliTrainDist, ScalingReportsTheAllreduceBandwidthsAsNcclTestsDefinesThem) {
  const auto r = run_d5({"--threads", "1", "scaling", "--ranks", "1,3", "--mode", "weak", "--batch", "8", "--csv",
                         path("b.csv"), "--format", "json", "-o", path("b.json"), "--", "--model", "mlp", "--dataset",
                         "synthetic-learnable", "--set", "shape=16", "--set", "classes=4", "--set", "samples=256",
                         "--steps", "4", "--no-test", "--prefetch", "0", "--no-overlap"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(read_file(path("b.json")));
  ASSERT_EQ(j["cases"].size(), 2u);
  for (const auto& c : j["cases"]) {
    const int n = c["params"]["ranks"];
    const auto& b = c["extra"]["collective_bandwidth"];
    ASSERT_EQ(b["collective"], "allreduce") << c["name"];
    const auto& v = c["extra"]["distributed"]["ranks"][0]["volume"]["collectives"]["allreduce"];
    const double algbw = v["bytes"].get<double>() / v["time_s"].get<double>();
    EXPECT_DOUBLE_EQ(b["algbw"].get<double>(), algbw) << c["name"];
    EXPECT_DOUBLE_EQ(b["busbw"].get<double>(), algbw * 2.0 * (n - 1) / n) << c["name"];
  }
  const std::string csv = read_file(path("b.csv"));
  EXPECT_NE(csv.find(",allreduce,"), std::string::npos) << csv;
}

// The pid of the d5 process that is rank `rank` of a run whose environment holds `marker`, or 0.
pid_t find_rank(const std::string& marker, int rank) {
  const std::string ompi = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank), pmi = "PMI_RANK=" + std::to_string(rank);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = read_file(e.path().string() + "/environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    env = "\n" + env;
    const std::string cmd = read_file(e.path().string() + "/cmdline");
    if (env.find("\n" + marker + "\n") == std::string::npos) continue;
    if (cmd.rfind(d5_binary(), 0) != 0) continue;  // the launcher itself, or a shell
    if (env.find("\n" + ompi + "\n") != std::string::npos || env.find("\n" + pmi + "\n") != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

struct FaultOutcome {
  bool started = false, ended = false;
  int status = 0;
  double seconds = 0;   // from the signal to the launcher's exit
  std::string said;     // the launcher's stdout and stderr, lower case
  bool others_left = false;
};

// The silence the watchdog reported ("has sent no heartbeat for 21.3 s"), or -1 without one.
double reported_silence(const std::string& said) {
  const std::string key = "has sent no heartbeat for ";
  const size_t at = said.find(key);
  if (at == std::string::npos) return -1;
  return std::strtod(said.c_str() + at + key.size(), nullptr);
}

// Launches 3 ranks training "forever", sends rank 1 `signal` once they train, and waits up to
// 40 s for the launcher to end.
FaultOutcome fault_run(const std::string& dir, int signal, const std::vector<std::string>& more) {
  FaultOutcome f;
  const std::string marker = "D5_FAULT_TEST=" + std::to_string(getpid());
  setenv("D5_FAULT_TEST", std::to_string(getpid()).c_str(), 1);
  const std::string out_p = dir + "/out", err_p = dir + "/err";
  std::vector<std::string> args = {D5_MPIEXEC, "-n", "3", d5_binary()};
  std::vector<std::string> train = {"train", "--model", "mlp", "--dataset", "synthetic-learnable", "--set", "shape=16",
                                    "--set", "classes=4", "--set", "samples=256", "--batch", "8", "--steps",
                                    "100000000", "--lr", "0.1", "--no-test", "--prefetch", "0", "--dist", "dsgd"};
  // Rank 0's first checkpoint says every rank is past start-up (its steps needed all of them).
  const std::string checkpoint = dir + "/ck";
  train.insert(train.end(), {"--checkpoint", checkpoint, "--checkpoint-every", "5"});
  train.insert(train.end(), more.begin(), more.end());
  args.insert(args.end(), train.begin(), train.end());
  const pid_t launcher = fork();
  if (launcher == 0) {
    setpgid(0, 0);
    const int out = open(out_p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  using clock = std::chrono::steady_clock;
  pid_t victim = 0;
  for (auto until = clock::now() + std::chrono::seconds(30); victim == 0 && clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    victim = find_rank(marker, 1);
  }
  if (victim == 0) {
    kill(-launcher, SIGKILL);
    waitpid(launcher, &f.status, 0);
    return f;
  }
  // A rank stopped inside MPI_Init or the watchdog's start-up exchange stops its peers there too,
  // before any watchdog runs (docs/distributed.md#faults); the fault comes once they train.
  for (auto until = clock::now() + std::chrono::seconds(60); !fs::exists(checkpoint) && clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!fs::exists(checkpoint)) {
    kill(-launcher, SIGKILL);
    waitpid(launcher, &f.status, 0);
    return f;
  }
  f.started = true;
  kill(victim, signal);
  const auto hit = clock::now();
  while (!f.ended && clock::now() - hit < std::chrono::seconds(40)) {
    f.ended = waitpid(launcher, &f.status, WNOHANG) == launcher;
    if (!f.ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  f.seconds = std::chrono::duration<double>(clock::now() - hit).count();
  if (!f.ended) {
    kill(victim, SIGKILL);
    kill(-launcher, SIGKILL);
    waitpid(launcher, &f.status, 0);
  }
  f.said = read_file(err_p) + read_file(out_p);
  std::transform(f.said.begin(), f.said.end(), f.said.begin(), [](unsigned char c) { return std::tolower(c); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  f.others_left = find_rank(marker, 0) != 0 || find_rank(marker, 1) != 0 || find_rank(marker, 2) != 0;
  if (f.others_left) kill(-launcher, SIGKILL);
  return f;
}

// A rank killed mid-training: every other rank ends, the launcher exits non-zero within 30 s,
// and its message names the rank.
TEST_F(CliTrainDist, AKilledRankEndsEveryRankWithinThirtySeconds) {
  const FaultOutcome f = fault_run(dir_.path.string(), SIGKILL, {});
  ASSERT_TRUE(f.started) << "the ranks never trained";
  ASSERT_TRUE(f.ended && f.seconds < 30) << "the run still ran " << f.seconds << " s after rank 1 was killed";
  EXPECT_TRUE(WIFEXITED(f.status) && WEXITSTATUS(f.status) != 0) << "status " << f.status;
  // Open MPI names the rank ("process rank 1 with PID ..."). MPICH's Hydra names a process by
  // pid ("bad termination of one of your application processes, pid P running at HOST"), and not
  // always the killed one: a survivor whose transfer from the dead peer failed may end first
  // (docs/distributed.md#faults).
  if (f.said.find("bad termination of one of your application processes") == std::string::npos) {
    EXPECT_NE(f.said.find("rank 1"), std::string::npos) << f.said;
  }
  EXPECT_FALSE(f.others_left) << "a rank outlived the run";
}

// A stopped rank is alive to the launcher, which therefore ends nothing: d5's watchdog must. With
// the default timeout (20 s) rank 1's right neighbour names it and the run ends with exit 4.
TEST_F(CliTrainDist, AStoppedRankIsNamedByTheWatchdogAndEndsTheRunWithinThirtySeconds) {
  const FaultOutcome f = fault_run(dir_.path.string(), SIGSTOP, {});
  ASSERT_TRUE(f.started) << "the ranks never trained";
  ASSERT_TRUE(f.ended && f.seconds < 30) << "the run still ran " << f.seconds << " s after rank 1 was stopped";
  // The silence the watchdog measured, not the time since SIGSTOP: under load the stopped rank's
  // last heartbeat may precede the signal by more than one interval.
  EXPECT_GE(reported_silence(f.said), 20.0) << "the watchdog fired before its 20 s timeout:\n" << f.said;
  EXPECT_TRUE(WIFEXITED(f.status) && WEXITSTATUS(f.status) == 4) << "status " << f.status << "\n" << f.said;
  EXPECT_NE(f.said.find("d5: rank 2 (" ), std::string::npos) << f.said;
  EXPECT_NE(f.said.find("rank 1 (host"), std::string::npos) << f.said;
  EXPECT_NE(f.said.find("has sent no heartbeat for 2"), std::string::npos) << f.said;
  EXPECT_FALSE(f.others_left) << "a rank outlived the run";
}

// --dist-timeout sets the watchdog's patience; the result file records it.
TEST_F(CliTrainDist, DistTimeoutIsHonouredAndRecorded) {
  const FaultOutcome f = fault_run(dir_.path.string(), SIGSTOP, {"--dist-timeout", "3"});
  ASSERT_TRUE(f.started);
  ASSERT_TRUE(f.ended);
  EXPECT_GE(reported_silence(f.said), 3.0) << f.said;
  EXPECT_LT(f.seconds, 15);
  EXPECT_NE(f.said.find("watchdog timeout 3 s"), std::string::npos) << f.said;

  const std::string out = path("r.json");
  auto r = mpirun(2, train_args(8, 4, {"--dist", "dsgd", "--dist-timeout", "7.5", "--format", "json", "-o", out}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["cases"][0]["params"]["dist"]["watchdog_s"].get<double>(), 7.5);
}

}  // namespace
}  // namespace d5::test
