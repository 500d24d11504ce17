// The downloader against a file:// mirror of the shared MNIST test split: the real libcurl,
// resume and verification code paths, offline.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data_test_util.h"
#include "deep500/train/downloader.h"
#include "deep500/core/error.h"
#include "core/digest.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;

const char* kImages = "t10k-images-idx3-ubyte.gz";
const char* kLabels = "t10k-labels-idx1-ubyte.gz";

class Downloader : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!download_supported()) GTEST_SKIP() << "built without libcurl";
    if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
    for (const char* f : {kImages, kLabels}) fs::copy_file(kMnistDir + "/" + f, mirror_.file(f));
    options_.dir = dest_.path.string();
    options_.mirror = "file://" + mirror_.path.string();
    options_.split = "test";
  }
  std::string sha256_of(const std::string& path) {
    const auto b = read_bytes(path);
    return sha256_hex(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
  }

  TempDir mirror_, dest_;
  DownloadOptions options_;
};

}  // namespace

TEST(DownloadCatalog, ListsTheSetsWithChecksums) {
  for (const std::string name : {"mnist", "fashion-mnist", "cifar10", "cifar100"}) {
    const auto& d = find_downloadable(name);
    EXPECT_FALSE(d.base_urls.empty()) << name;
    for (const auto& f : d.files) {
      EXPECT_TRUE(f.sha256.size() == 64 || f.md5.size() == 32) << name << "/" << f.name;
      EXPECT_NE(f.sha256.empty(), f.md5.empty()) << name << "/" << f.name;
    }
  }
  EXPECT_THROW(find_downloadable("imagenet"), InvalidArgument);
}

TEST(DownloadCatalog, CacheDirectoryFollowsTheEnvironment) {
  const char* old = std::getenv("D5_DATA_DIR");
  const std::string saved = old ? old : "";
  setenv("D5_DATA_DIR", "/tmp/d5-cache-test", 1);
  EXPECT_EQ(default_data_dir("mnist"), "/tmp/d5-cache-test/mnist");
  unsetenv("D5_DATA_DIR");
  if (const char* home = std::getenv("HOME"); home && *home) {
    EXPECT_EQ(default_data_dir("cifar10"), std::string(home) + "/.cache/deep500/cifar10");
  }
  if (old) setenv("D5_DATA_DIR", saved.c_str(), 1);
}

TEST_F(Downloader, FetchesAndVerifiesTheTestSplit) {
  const auto files = download_dataset("mnist", options_);
  ASSERT_EQ(files.size(), 2u);  // the train files are not requested
  for (const auto& f : files) {
    EXPECT_TRUE(f.fetched) << f.name;
    EXPECT_FALSE(f.resumed) << f.name;
    EXPECT_EQ(f.checksum_kind, "sha256");
    EXPECT_EQ(f.url, options_.mirror + "/" + f.name);
    EXPECT_EQ(f.bytes_transferred, static_cast<int64_t>(fs::file_size(kMnistDir + "/" + f.name)));
    EXPECT_EQ(sha256_of(f.path), f.checksum);
    EXPECT_FALSE(fs::exists(f.path + ".part"));
  }
  EXPECT_EQ(files[0].checksum, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6");
}

TEST_F(Downloader, PresentVerifiedFilesAreNotFetchedAgain) {
  download_dataset("mnist", options_);
  options_.mirror = "file://" + dest_.path.string() + "/no-such-mirror";  // a transfer would fail
  const auto again = download_dataset("mnist", options_);
  ASSERT_EQ(again.size(), 2u);
  for (const auto& f : again) {
    EXPECT_FALSE(f.fetched) << f.name;
    EXPECT_EQ(f.bytes_transferred, 0);
  }
}

TEST_F(Downloader, ResumesAPartialDownload) {
  const auto full = read_bytes(mirror_.file(kImages));
  const std::vector<uint8_t> half(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(full.size() / 2));
  write_bytes(dest_.file(std::string(kImages) + ".part"), half);
  const auto files = download_dataset("mnist", options_);
  ASSERT_EQ(files[0].name, kImages);
  EXPECT_TRUE(files[0].resumed);
  EXPECT_EQ(files[0].bytes_transferred, static_cast<int64_t>(full.size() - half.size()));
  EXPECT_EQ(read_bytes(files[0].path), full);
  EXPECT_FALSE(files[1].resumed);
}

TEST_F(Downloader, ResumingFromACorruptPartIsCaughtAndDeleted) {
  const auto full = read_bytes(mirror_.file(kImages));
  std::vector<uint8_t> bad(full.begin(), full.begin() + 1000);
  bad[10] ^= 1;
  write_bytes(dest_.file(std::string(kImages) + ".part"), bad);
  expect_error<FormatError>([&] { download_dataset("mnist", options_); },
                            {kImages, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", "deleted"});
  EXPECT_FALSE(fs::exists(dest_.file(kImages)));
  EXPECT_FALSE(fs::exists(dest_.file(std::string(kImages) + ".part")));
  // The next attempt starts afresh and succeeds.
  EXPECT_TRUE(download_dataset("mnist", options_)[0].fetched);
  EXPECT_EQ(read_bytes(dest_.file(kImages)), full);
}

TEST_F(Downloader, CorruptMirrorCopyIsAnErrorNamingBothChecksums) {
  auto bytes = read_bytes(mirror_.file(kLabels));
  bytes[100] ^= 0xff;
  write_bytes(mirror_.file(kLabels), bytes);
  const std::string actual = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  expect_error<FormatError>([&] { download_dataset("mnist", options_); },
                            {kLabels, "expected f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                             "got " + actual, "deleted"});
  EXPECT_FALSE(fs::exists(dest_.file(kLabels)));
  EXPECT_FALSE(fs::exists(dest_.file(std::string(kLabels) + ".part")));
}

// A stale copy in the destination (one that does not verify) is not left behind when the fresh
// download fails too: a dataset would read it as if it were the publisher's (found by fuzz_download).
TEST_F(Downloader, AStaleFileIsDeletedEvenWhenTheNewDownloadFails) {
  auto bytes = read_bytes(mirror_.file(kLabels));
  write_bytes(dest_.file(kLabels), std::vector<uint8_t>(bytes.begin(), bytes.begin() + 50));  // stale, truncated
  bytes[100] ^= 0xff;
  write_bytes(mirror_.file(kLabels), bytes);  // and the mirror's copy is corrupt
  expect_error<FormatError>([&] { download_dataset("mnist", options_); }, {kLabels, "deleted"});
  EXPECT_FALSE(fs::exists(dest_.file(kLabels)));
  EXPECT_FALSE(fs::exists(dest_.file(std::string(kLabels) + ".part")));
}

TEST_F(Downloader, MissingMirrorFileIsAnIoErrorNamingTheUrl) {
  fs::remove(mirror_.file(kLabels));
  expect_error<IoError>([&] { download_dataset("mnist", options_); }, {options_.mirror + "/" + kLabels});
}

TEST_F(Downloader, MirrorComesFromTheEnvironmentWhenNotGiven) {
  options_.mirror.clear();
  setenv("D5_DATA_MIRROR", ("file://" + mirror_.path.string() + "/").c_str(), 1);
  const auto files = download_dataset("mnist", options_);
  unsetenv("D5_DATA_MIRROR");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].url, "file://" + mirror_.path.string() + "/" + kImages);
}

TEST_F(Downloader, RefusesAnUnknownSplit) {
  options_.split = "validation";
  EXPECT_THROW(download_dataset("mnist", options_), InvalidArgument);
}

}  // namespace d5::test
