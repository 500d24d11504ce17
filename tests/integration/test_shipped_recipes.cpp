// The recipes d5 ships (recipes/*.yaml), run for real at a small size with --set: every run of
// every entry executes its command and writes results, and the recipes whose criteria can hold
// at that size PASS. `d5 run --dry-run` only plans a recipe; this catches a shipped recipe whose
// options a command no longer accepts, whose data path broke, or whose runs crash. Label
// `recipes` (ctest -L recipes); CI runs it (docs/testing.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

// A shipped recipe at a small size. `passes`: every criterion holds at that size too. The others
// train to an accuracy target that a tenth of the training cannot reach; there a criterion may
// FAIL, but only on the quality it measures, never for want of results.
struct SmallRun {
  std::string recipe;
  std::vector<std::string> sets;
  bool passes;
  std::vector<std::string> needs;  // "torch": a run on LibTorch; "mpi": runs launched through mpirun
  bool needs_cifar = false;
  // The paper's recipes: the section of `d5 report` that draws the figure from the run's results.
  std::string figure_section = "";
};

// One problem per suite: the smallest of each DeepBench suite where the first is large.
const std::vector<SmallRun>& small_runs() {
  static const std::vector<SmallRun> runs = {
      {"deepbench-gemm",
       {"limit=1", "min-time=0.01", "max-time=0.05", "filter=m35n700k2048_NN$|m1760n16k1760_NN$"},
       true,
       {}},
      {"deepbench-conv", {"limit=1", "min-time=0.01", "max-time=0.05"}, true, {}},
      {"deepbench-rnn",
       {"limit=1", "min-time=0.01", "max-time=0.05", "filter=_h256mb16t150$|_h256mb1t150$|_h64mb1t96$"},
       true,
       {}},
      {"distributed-schemes", {"ranks=2", "steps=4", "data-dir=" + kMnist}, true, {"mpi"}},
      {"mnist-lenet-tta", {"epochs=1", "seeds=2", "data-dir=" + kMnist}, false, {"torch"}},
      {"optimizers-compare", {"epochs=1", "data-dir=" + kMnist}, false, {"torch"}},
      {"cifar10-resnet20", {"epochs=1", "batch=32"}, false, {"torch"}, true},
      {"rl", {"seeds=1", "max-env-steps=2000"}, false, {}},
      // The tokenizers cached once per build tree, as the text twins'.
      {"text",
       {"time-limit=5", "data-dir=" D5_BINARY_DIR "/test-data/wordnet-glosses",
        "seq2seq-transformer.data-dir=" D5_BINARY_DIR "/test-data/number-words",
        "seq2seq-to-numerals.data-dir=" D5_BINARY_DIR "/test-data/number-words"},
       false,
       {"torch"}},
      // The clips spoken once per build tree, as the speech twins'.
      {"speech",
       {"time-limit=5", "kws-dscnn.data-dir=" D5_BINARY_DIR "/test-data/spoken-words",
        "speech-ctc.data-dir=" D5_BINARY_DIR "/test-data/spoken-digits"},
       false,
       {"torch"}},
      // Scenes drawn once per build tree from ../shared's MNIST test file (digits=test-halves).
      {"detection",
       {"time-limit=5", "data-dir=" D5_BINARY_DIR "/test-data/mnist-scenes",
        "set=digits=test-halves,mnist-dir=" + kMnist},
       false,
       {"torch"}},
      // recipes/paper: the original work's experiments (docs/paper.md).
      {"paper/fig6-deepbench",
       {"limit=1", "min-time=0.01", "max-time=0.05", "gemm-overhead.rounds=6", "gemm-overhead.round-seconds=0.01",
        "conv-overhead.rounds=6", "conv-overhead.round-seconds=0.01"},
       true,
       {},
       false,
       "d5 against native calls"},
      {"paper/fig7-microbatching", {"batch=4", "min-runs=2", "max-time=0.5"}, true, {}, false, "Network times"},
      {"paper/fig8-dataset-latency",
       {"batches=6", "mnist.data-dir=" + kMnist, "image-tar.generate-images=64", "image-tar.image-size=48"},
       true,
       {},
       false,
       "Dataset latency"},
      // The generated sets in the build tree: a cold read needs a disk, and /tmp may be tmpfs.
      {"paper/table3-image-decoding",
       {"batches=6", "generate-images=64", "image-size=48", "work-dir=" D5_BINARY_DIR},
       true,
       {},
       false,
       "Dataset latency"},
      {"paper/fig9-optimizers", {"epochs=2", "train-range=0:128", "test-range=0:64"}, false, {"torch"}, false,
       "Convergence"},
      {"paper/fig10-adam-backends", {"epochs=2", "train-range=0:512", "data-dir=" + kMnist}, false, {"torch"}, false,
       "Convergence"},
      {"paper/fig11-divergence", {"steps=20"}, true, {"torch"}, false, "Optimizer divergence"},
      {"paper/fig12-scaling", {"ranks=1,2", "steps=4", "mode=weak", "data-dir=" + kMnist}, true, {"mpi"}, false, "Scaling"},
      {"quickstart",
       {"deepbench.limit=1", "deepbench.min-time=0.01", "deepbench.max-time=0.05", "zoo-inference.min-runs=2",
        "zoo-inference.max-time=0.2", "zoo-train-step.min-runs=2", "zoo-train-step.max-time=0.2",
        "mnist-lenet5.epochs=1", "dsgd-scaling.steps=4", "rl-cartpole.max-env-steps=2000", "data-dir=" + kMnist,
        // After the MNIST directory, which it overrides (the last --set wins): the clips' cache.
        "speech-kws.data-dir=" D5_BINARY_DIR "/test-data/spoken-words", "speech-kws.epochs=2",
        "text-translate.data-dir=" D5_BINARY_DIR "/test-data/number-words", "text-translate.epochs=1",
        "detect.data-dir=" D5_BINARY_DIR "/test-data/mnist-scenes", "detect.epochs=1",
        "detect.set=digits=test-halves,mnist-dir=" + kMnist},
       false,
       {"torch", "mpi"}},
  };
  return runs;
}

void PrintTo(const SmallRun& r, std::ostream* os) { *os << r.recipe; }

// What this d5 lacks of `needs`, from its manifest (`d5 info`): a backend not built, or no MPI.
std::vector<std::string> missing(const std::vector<std::string>& needs) {
  static const json info = json::parse(run_d5({"info", "--format", "json"}).out);
  std::vector<std::string> lacks;
  for (const auto& n : needs) {
    const bool have = n == "mpi" ? info["libraries"].contains("mpi")
                                 : std::any_of(info["backends"].begin(), info["backends"].end(),
                                               [&](const json& b) { return b["name"] == n; });
    if (!have) lacks.push_back(n);
  }
  return lacks;
}

json load(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// CIFAR-10's binary layout (five training batches, one test batch) with 32 random images each:
// enough for a step of ResNet-20, nothing to learn from.
void write_small_cifar10(const fs::path& dir) {
  fs::create_directories(dir);
  uint32_t state = 12345;
  auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                        "data_batch_5.bin", "test_batch.bin"}) {
    std::ofstream out(dir / f, std::ios::binary);
    for (int r = 0; r < 32; ++r) {
      out.put(static_cast<char>(r % 10));
      for (int k = 0; k < 3 * 32 * 32; ++k) out.put(static_cast<char>(next() >> 24));
    }
  }
}

class ShippedRecipe : public ::testing::TestWithParam<SmallRun> {
 protected:
  static void SetUpTestSuite() { set_mpi_launcher_environment(); }
};

TEST_P(ShippedRecipe, RunsAtASmallSize) {
  const SmallRun& run = GetParam();
  if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  for (const auto& lack : missing(run.needs))
    GTEST_SKIP() << run.recipe << " needs " << (lack == "mpi" ? "MPI" : "the " + lack + " backend")
                 << ", which this build lacks";
  TempDir dir("d5-shipped-recipe");
  std::vector<std::string> args = {"--threads", "1", "run", run.recipe, "--results-dir",
                                   (dir.path / "results").string()};
  for (const auto& s : run.sets) args.insert(args.end(), {"--set", s});
  if (run.needs_cifar) {
    write_small_cifar10(dir.path / "cifar10");
    args.insert(args.end(), {"--set", "data-dir=" + (dir.path / "cifar10").string()});
  }
  const auto plan = run_d5([&] {
    auto a = args;
    a.push_back("--dry-run");
    return a;
  }());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto r = run_d5(args);
  if (run.passes) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;  // 1: a criterion FAILed

  const json summary = load(dir.path / "results" / "run.json");
  ASSERT_EQ(static_cast<int>(summary["cases"].size()), count_lines(plan.out)) << "one case per planned run";
  for (const auto& c : summary["cases"]) {
    const json& x = c["extra"];
    SCOPED_TRACE(x["id"].get<std::string>());
    // The command itself succeeded (3: a backend could not run some of its cases, which it names).
    EXPECT_TRUE(x["exit_code"] == 0 || x["exit_code"] == 3 || (!run.passes && x["exit_code"] == 1))
        << x.dump() << "\n" << read_file((dir.path / "results" / x["log_file"].get<std::string>()).string());
    const fs::path result = dir.path / "results" / x["result_file"].get<std::string>();
    ASSERT_TRUE(fs::exists(result)) << x.dump();
    EXPECT_FALSE(load(result)["cases"].empty()) << result;
    EXPECT_EQ(x["validity"] == "VALID", x["invalid_reasons"].empty()) << x.dump();
    for (const auto& reason : x["invalid_reasons"])  // statistics only, never a missing result
      EXPECT_EQ(reason.get<std::string>().find("without results"), std::string::npos) << reason;
    for (const auto& k : x["criteria"]) {
      if (run.passes) {
        EXPECT_EQ(k["verdict"], "PASS") << k.dump();
      }
      EXPECT_EQ(k["detail"].get<std::string>().find("no result"), std::string::npos) << k.dump();
      if (k["verdict"] == "FAIL" && k["criterion"] == "no case FAILED") {
        EXPECT_NE(k["detail"].get<std::string>().find("not reached"), std::string::npos)
            << "only a missed accuracy target may fail a case at this size: " << k.dump();
      }
    }
  }
  if (run.figure_section.empty()) return;
  // One of the paper's: `d5 report` over the run's directory draws the figure in its section.
  const std::string page = (dir.path / "report.html").string();
  const auto report = run_d5({"report", (dir.path / "results").string(), "-o", page});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(read_file(page).find("<h2>" + run.figure_section + "</h2>"), std::string::npos)
      << run.recipe << ": no section '" << run.figure_section << "' in the report";
  EXPECT_EQ(report.out.find(" 0 plot(s)"), std::string::npos) << report.out;
  // Every value the figure plots is the value of the run's result files.
  const std::string values = (dir.path / "values.txt").string();
  const int status = std::system((std::string(D5_PYTHON) + " " D5_SOURCE_DIR "/tests/integration/check_report_values.py " +
                                  page + " " + (dir.path / "results").string() + " > " + values + " 2>&1")
                                     .c_str());
  EXPECT_EQ(status, 0) << read_file(values);
}

INSTANTIATE_TEST_SUITE_P(Recipes, ShippedRecipe, ::testing::ValuesIn(small_runs()), [](const auto& info) {
  std::string n = info.param.recipe;
  std::replace(n.begin(), n.end(), '-', '_');
  std::replace(n.begin(), n.end(), '/', '_');
  return n;
});

// Every recipe `d5 run --list` shows has its small run above, and nothing else is listed there.
TEST(ShippedRecipes, EveryShippedRecipeHasASmallRun) {
  const auto list = run_d5({"run", "--list", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::set<std::string> shipped, small;
  for (const auto& r : json::parse(list.out)) {
    shipped.insert(r["shipped_as"].get<std::string>());  // what `d5 run` takes: paper/fig9-optimizers
    EXPECT_EQ(r["name"], r["shipped_as"]) << "a shipped recipe's name is where it lies under recipes/";
  }
  for (const auto& s : small_runs()) small.insert(s.recipe);
  EXPECT_EQ(shipped, small);
}

}  // namespace

}  // namespace d5::test
