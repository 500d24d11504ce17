// `d5 data bench` (docs/data-bench.md): DatasetLatency of real and synthetic sources, orders,
// page-cache states and several reading processes, through the real binary.
#include <gtest/gtest.h>

#include <sys/vfs.h>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMnistDir = D5_SOURCE_DIR "/../shared/data/mnist";

json bench(const std::vector<std::string>& args, int expected_exit = 0) {
  std::vector<std::string> argv{"data", "bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--format", "json"});
  const auto r = run_d5(argv);
  EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out;
  return r.exit_code == expected_exit && !r.out.empty() ? json::parse(r.out) : json();
}

std::vector<std::string> mnist(std::vector<std::string> more) {
  std::vector<std::string> a{"--dataset", "mnist", "--data-dir", kMnistDir, "--split", "test"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST(CliDataBench, RealMnistTimesEachBatchAndDerivesItsThroughput) {
  ASSERT_TRUE(fs::exists(kMnistDir + "/t10k-images-idx3-ubyte.gz")) << "MNIST test split missing at " << kMnistDir;
  const json j = bench(mnist({"--batch", "32", "--batches", "9", "--warmup", "1"}));
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["cases"].size(), 1u);
  const json& c = j["cases"][0];
  EXPECT_EQ(c["name"], "mnist/real/sequential/warm/ranks=1");
  EXPECT_EQ(c["state"], "PASSED");
  EXPECT_EQ(c["params"]["batch"], 32);
  EXPECT_EQ(c["extra"]["dataset"]["size"], 10000);
  EXPECT_EQ(c["extra"]["dataset"]["input_shape"], json({1, 28, 28}));
  EXPECT_EQ(c["extra"]["files"], 4);  // the four IDX files of ../shared
  const json& latency = c["metrics"][0];
  const json& per_s = c["metrics"][1];
  EXPECT_EQ(latency["name"], "DatasetLatency");
  EXPECT_EQ(latency["unit"], "s");
  ASSERT_EQ(latency["samples"].size(), 9u);
  ASSERT_EQ(per_s["samples"].size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    const double s = latency["samples"][i];
    EXPECT_GT(s, 0);
    EXPECT_NEAR(per_s["samples"][i].get<double>(), 32 / s, 1e-9 * 32 / s);
  }
  EXPECT_EQ(c["outcome"]["runs"], 9);
  EXPECT_EQ(c["outcome"]["warmup_runs"], 1);
  EXPECT_TRUE(j["manifest"].contains("version"));
}

TEST(CliDataBench, SyntheticSourceHasTheRealShapeClassesAndSize) {
  const json j = bench(mnist({"--source", "synthetic", "--batches", "6", "--set", "range=0:500"}));
  ASSERT_TRUE(j.is_object());
  const json& d = j["cases"][0]["extra"]["dataset"];
  EXPECT_EQ(d["size"], 500);
  EXPECT_EQ(d["synthetic_options"], json({{"shape", "1x28x28"}, {"classes", "10"}, {"samples", "500"}}));
  EXPECT_EQ(j["cases"][0]["name"], "mnist/synthetic/sequential/warm/ranks=1");
}

// Each rank is its own process (distinct pids); none starts timing before every rank has finished
// its warm-up, and each times its own share of the batches.
TEST(CliDataBench, SeveralRanksStartTogetherInSeparateProcesses) {
  const json j = bench(mnist({"--ranks", "3", "--batches", "5", "--order", "shuffled"}));
  ASSERT_TRUE(j.is_object());
  const json& c = j["cases"][0];
  EXPECT_EQ(c["params"]["ranks"], 3);
  EXPECT_EQ(c["metrics"][0]["samples"].size(), 15u);
  const json& ranks = c["extra"]["per_rank"];
  ASSERT_EQ(ranks.size(), 3u);
  std::set<int64_t> pids;
  int64_t last_ready = 0;
  for (const auto& r : ranks) {
    pids.insert(r["pid"].get<int64_t>());
    last_ready = std::max(last_ready, r["ready_ns"].get<int64_t>());
  }
  EXPECT_EQ(pids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ranks[i]["rank"], i);
    EXPECT_GE(ranks[i]["start_ns"].get<int64_t>(), last_ready) << "rank " << i << " started before all were ready";
    EXPECT_GT(ranks[i]["end_ns"].get<int64_t>(), ranks[i]["start_ns"].get<int64_t>());
  }
}

// A cold read of a generated tar: before every batch almost nothing of it is cached, after it the
// batch's pages are. On a file system in memory the drop cannot work and the case says so.
TEST(CliDataBench, ColdCacheOfGeneratedImagesIsMeasuredNotAssumed) {
  {
    TempDir probe;
    const auto r = run_d5({"data", "bench", "--dataset", "image-tar", "--generate-images", "1", "--image-size", "8",
                           "--batch", "1", "--batches", "1", "--work-dir", probe.path.string(), "--format", "json"});
    if (r.exit_code == kExitNotBuilt) GTEST_SKIP() << "this d5 cannot generate images: " << r.err;
  }
  TempDir work(D5_BINARY_DIR "/d5-data-bench-test");
  struct statfs fs {};
  ASSERT_EQ(::statfs(work.path.c_str(), &fs), 0);
  const bool in_memory = fs.f_type == 0x01021994;  // TMPFS_MAGIC
  for (const char* format : {"image-tar", "tfrecord"}) {
    const json j = bench({"--dataset", format, "--generate-images", "48", "--image-size", "48", "--batch", "8",
                          "--batches", "6", "--cache", "cold", "--order", "shuffled", "--work-dir", work.path.string()},
                         in_memory ? 1 : 0);
    ASSERT_TRUE(j.is_object()) << format;
    const json& c = j["cases"][0];
    EXPECT_EQ(c["extra"]["generated"]["images"], 48) << format;
    EXPECT_GT(c["extra"]["generated"]["jpeg_bytes"].get<double>(), 48 * 100.0) << format;
    if (in_memory) {
      EXPECT_EQ(c["state"], "MISTRUSTED") << format;
    } else {
      EXPECT_EQ(c["state"], "PASSED") << format << ": " << c["detail"];
      EXPECT_LT(c["extra"]["resident_before"].get<double>(), 0.05) << format;
      EXPECT_GT(c["extra"]["resident_after"].get<double>(), 0.0) << format;
    }
    EXPECT_TRUE(fs::is_empty(work.path)) << format << ": the generated set was not removed";
  }
}

TEST(CliDataBench, RefusesWhatItCannotMeasure) {
  const auto refused = [](std::vector<std::string> args, const std::string& part) {
    std::vector<std::string> argv{"data", "bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_d5(argv);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  };
  refused(mnist({"--source", "synthetic", "--cache", "cold"}), "reads no file");
  refused({"--dataset", "mnist", "--generate-images", "10"}, "image-tar or a tfrecord");
  refused({"--dataset", "image-tar", "--generate-images", "10", "--data-dir", "x.tar"}, "leave out --data-dir");
  refused(mnist({"--set", "range=0:10", "--batch", "64"}), "fewer than one batch");
  refused({"--dataset", "synthetic", "--cache", "cold"}, "--data-dir");
  refused(mnist({"--ranks", "0"}), "--ranks");
}

}  // namespace d5::test
