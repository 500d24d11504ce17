// Integration tests of `d5 data`: the real binary listing, describing and downloading datasets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;

const std::string kMnistDir = D5_SOURCE_DIR "/../shared/data/mnist";
bool have_mnist() { return fs::exists(kMnistDir + "/t10k-images-idx3-ubyte.gz"); }

}  // namespace

TEST(CliData, ListNamesFormatsAndDownloadableSets) {
  const auto r = run_d5({"data", "list", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> formats, sets;
  for (const auto& f : j["formats"]) formats.insert(f["name"]);
  for (const auto& s : j["downloadable"]) sets.insert(s["name"]);
  for (const char* f : {"mnist", "fashion-mnist", "npy", "synthetic", "synthetic-learnable"})
    EXPECT_TRUE(formats.count(f)) << f;
  for (const char* s : {"mnist", "fashion-mnist", "cifar10", "cifar100"}) EXPECT_TRUE(sets.count(s)) << s;
  const auto console = run_d5({"data", "list"});
  EXPECT_EQ(console.exit_code, 0);
  EXPECT_NE(console.out.find("synthetic-learnable"), std::string::npos);
}

TEST(CliData, InfoOnMnistTestSplitWithRange) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  const auto r = run_d5({"data", "info", "--dataset", "mnist", "--data-dir", kMnistDir, "--split", "test", "--format",
                         "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["size"], 10000);
  EXPECT_EQ(j["classes"], 10);
  EXPECT_EQ(j["samples"]["input"]["shape"], nlohmann::json({1, 28, 28}));
  EXPECT_EQ(j["samples"]["input"]["dtype"], "f32");
  EXPECT_EQ(j["label_histogram"], nlohmann::json({980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));

  TempDir out;
  const std::string file = out.path.string() + "/info.json";
  const auto ranged = run_d5({"data", "info", "--dataset", "mnist", "--data-dir", kMnistDir, "--split", "test", "--set",
                              "range=8000:10000", "--format", "json", "-o", file});
  ASSERT_EQ(ranged.exit_code, 0) << ranged.err;
  const auto rj = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(rj["size"], 2000);
  EXPECT_EQ(rj["dataset"], "mnist[8000:10000]");
  const auto h = rj["label_histogram"].get<std::vector<int64_t>>();
  EXPECT_EQ(std::accumulate(h.begin(), h.end(), int64_t{0}), 2000);
}

TEST(CliData, InfoOnSyntheticFollowsOptionsAndSeed) {
  const std::vector<std::string> args = {"data", "info", "--dataset", "synthetic", "--set", "shape=3x4x4", "--set",
                                         "classes=5", "--set", "samples=500", "--format", "json"};
  const auto r = run_d5(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["size"], 500);
  EXPECT_EQ(j["samples"]["input"]["shape"], nlohmann::json({3, 4, 4}));
  EXPECT_EQ(j["label_histogram"].size(), 5u);
  EXPECT_EQ(run_d5(args).out, r.out);  // same seed, same labels
  auto seeded = args;
  seeded.insert(seeded.begin(), {"--seed", "99"});
  EXPECT_NE(run_d5(seeded).out, r.out);
}

// Exported, a synthetic set (2,500 samples: more than one chunk of the export) reads back through
// the npy format with the same labels, and exporting that again gives the same bytes.
TEST(CliData, ExportWritesWhatTheNpyFormatReadsBack) {
  TempDir dir("d5-data-export");
  const std::vector<std::string> set = {"--set", "shape=2x3", "--set", "classes=4", "--set", "samples=2500"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const auto e = run_d5(with({"data", "export", "--dataset", "synthetic", "--to", dir.file("a"), "--format", "json"}, set));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["size"], 2500);
  EXPECT_EQ(j["files"]["input"]["shape"], nlohmann::json({2500, 2, 3}));
  EXPECT_EQ(j["files"]["input"]["dtype"], "f32");
  EXPECT_EQ(j["files"]["labels"]["dtype"], "i64");
  const auto original = run_d5(with({"data", "info", "--dataset", "synthetic", "--format", "json"}, set));
  const auto exported = run_d5({"data", "info", "--dataset", "npy", "--data-dir", dir.file("a"), "--format", "json"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(nlohmann::json::parse(exported.out)["label_histogram"],
            nlohmann::json::parse(original.out)["label_histogram"]);
  ASSERT_EQ(run_d5({"data", "export", "--dataset", "npy", "--data-dir", dir.file("a"), "--to", dir.file("b")}).exit_code,
            0);
  for (const char* f : {"inputs.npy", "labels.npy"})
    EXPECT_EQ(read_file(dir.file("b") + "/" + f), read_file(dir.file("a") + "/" + f)) << f;
  // An unknown format, or no --to: usage errors.
  EXPECT_EQ(run_d5({"data", "export", "--dataset", "nope", "--to", dir.file("c")}).exit_code, 2);
  EXPECT_EQ(run_d5({"data", "export", "--dataset", "synthetic"}).exit_code, 2);
}

// A translation set's third tensor goes beside the other two, and its end token into the JSON;
// the console lists every tensor and leaves the empty classes of a vocabulary-sized histogram out.
TEST(CliData, ExportWritesEveryTensorOfASequenceToSequenceSet) {
  TempDir dir("d5-data-export-s2s");
  const std::vector<std::string> data = {"--dataset", "number-words", "--split", "test", "--data-dir",
                                         dir.file("cache"), "--set", "samples=30"};
  std::vector<std::string> args = {"data", "export", "--to", dir.file("out"), "--format", "json"};
  args.insert(args.end(), data.begin(), data.end());
  const auto e = run_d5(args);
  if (e.exit_code == kExitNotBuilt) GTEST_SKIP() << "number-words needs SentencePiece: " << e.err;
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["end_token"], j["vocabulary"].get<int>() - 1);
  EXPECT_EQ(j["files"]["decoder_input"]["shape"], nlohmann::json({30, 12}));
  EXPECT_EQ(j["files"]["decoder_input"]["path"], dir.file("out") + "/decoder_input.npy");
  EXPECT_TRUE(std::filesystem::exists(dir.file("out") + "/decoder_input.npy"));
  EXPECT_EQ(j["files"]["labels"]["shape"], nlohmann::json({30, 12}));
  std::vector<std::string> info = {"data", "info"};
  info.insert(info.end(), data.begin(), data.end());
  const auto i = run_d5(info);
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("decoder_input  i64[12] per sample"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("(classes without a sample left out)"), std::string::npos) << i.out;
  EXPECT_EQ(i.out.find("            50: 0"), std::string::npos) << i.out;
}

TEST(CliData, ErrorsMapToExitCodes) {
  auto r = run_d5({"data", "info", "--dataset", "imagenet-22k"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("known:"), std::string::npos) << r.err;
  r = run_d5({"data", "info", "--dataset", "synthetic", "--set", "colour=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("colour"), std::string::npos) << r.err;
  r = run_d5({"data", "info", "--dataset", "synthetic", "--set", "noequals"});
  EXPECT_EQ(r.exit_code, 2);
  TempDir empty;
  r = run_d5({"data", "info", "--dataset", "mnist", "--data-dir", empty.path.string()});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("d5 data download mnist"), std::string::npos) << r.err;
  r = run_d5({"data", "download", "imagenet"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliData, DownloadFromAFileMirrorThenInfoReadsTheCache) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  const auto probe = nlohmann::json::parse(run_d5({"data", "list", "--format", "json"}).out);
  if (!probe["download_supported"].get<bool>()) {
    const auto r = run_d5({"data", "download", "mnist", "--mirror", "file://" + kMnistDir});
    EXPECT_EQ(r.exit_code, kExitNotBuilt);
    EXPECT_NE(r.err.find("libcurl4-openssl-dev"), std::string::npos) << r.err;
    GTEST_SKIP() << "built without libcurl";
  }
  TempDir dir;
  const std::vector<std::string> args = {"data", "download", "mnist", "--split", "test", "--dir", dir.path.string(),
                                         "--mirror", "file://" + kMnistDir, "--format", "json"};
  const auto first = run_d5(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(first.err.empty()) << "no progress bar when stderr is not a terminal: " << first.err;
  const auto j = nlohmann::json::parse(first.out);
  ASSERT_EQ(j["files"].size(), 2u);
  for (const auto& f : j["files"]) {
    EXPECT_TRUE(f["fetched"].get<bool>());
    EXPECT_EQ(f["checksum_kind"], "sha256");
  }
  const auto again = nlohmann::json::parse(run_d5(args).out);
  for (const auto& f : again["files"]) EXPECT_FALSE(f["fetched"].get<bool>());

  // The default cache directory is $D5_DATA_DIR/NAME: info finds the files without --data-dir.
  setenv("D5_DATA_DIR", (dir.path.string() + "/cache").c_str(), 1);
  const auto cached = run_d5({"data", "download", "mnist", "--split", "test", "--mirror", "file://" + kMnistDir});
  EXPECT_EQ(cached.exit_code, 0) << cached.err;
  const auto info = run_d5({"data", "info", "--dataset", "mnist", "--split", "test", "--format", "json"});
  unsetenv("D5_DATA_DIR");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["size"], 10000);
  EXPECT_TRUE(fs::exists(dir.path.string() + "/cache/mnist/t10k-labels-idx1-ubyte.gz"));
}

TEST(CliData, CorruptMirrorFailsWithExitCode4) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  const auto probe = nlohmann::json::parse(run_d5({"data", "list", "--format", "json"}).out);
  if (!probe["download_supported"].get<bool>()) GTEST_SKIP() << "built without libcurl";
  TempDir mirror, dest;
  fs::copy_file(kMnistDir + "/t10k-images-idx3-ubyte.gz", mirror.path.string() + "/t10k-images-idx3-ubyte.gz");
  std::ofstream(mirror.path.string() + "/t10k-labels-idx1-ubyte.gz") << "not the labels";
  const auto r = run_d5({"data", "download", "mnist", "--split", "test", "--dir", dest.path.string(), "--mirror",
                         "file://" + mirror.path.string()});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("expected f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"), std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(dest.path.string() + "/t10k-images-idx3-ubyte.gz"));  // the good file is kept
  EXPECT_FALSE(fs::exists(dest.path.string() + "/t10k-labels-idx1-ubyte.gz"));
}

}  // namespace d5::test
