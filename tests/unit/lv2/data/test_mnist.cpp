// The "mnist" format on the real MNIST test split, and its refusals of damaged files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "data_test_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;

std::unique_ptr<Dataset> open_mnist(const std::string& dir, std::map<std::string, std::string> options = {}) {
  register_builtin_datasets();
  DatasetSpec spec;
  spec.name = "mnist";
  spec.data_dir = dir;
  spec.split = "test";
  spec.options = std::move(options);
  return open_dataset(spec);
}

// The raw (decompressed) IDX files of the test split in `dir`.
void write_raw_copy(const std::string& dir) {
  for (const char* stem : {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    write_bytes(dir + "/" + stem, read_maybe_gzip_file(kMnistDir + "/" + stem + ".gz"));
}

#define REQUIRE_MNIST() \
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir

}  // namespace

TEST(Mnist, TestSplitHasTheKnownSizeLabelsAndPixelRange) {
  REQUIRE_MNIST();
  const auto ds = open_mnist(kMnistDir);
  EXPECT_EQ(ds->name(), "mnist");
  EXPECT_EQ(ds->size(), 10000);
  EXPECT_EQ(ds->classes(), 10);
  EXPECT_EQ(ds->sample_descs().at(kDataInput).shape, (Shape{1, 28, 28}));
  // The first test digits are 7 2 1 0 4, and the class counts of the test split are published.
  const int64_t first[] = {7, 2, 1, 0, 4};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(ds->label(i), first[i]) << i;
  const int64_t counts[] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
  int64_t histogram[10] = {};
  for (int64_t i = 0; i < ds->size(); ++i) ++histogram[ds->label(i)];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(histogram[c], counts[c]) << "class " << c;

  const int64_t idx[] = {0, 9999, 3};
  const Batch b = ds->fetch(idx);
  const Tensor& x = b.at(kDataInput);
  EXPECT_EQ(x.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(b.at(kDataLabels).dtype(), DType::i64);
  EXPECT_EQ(b.at(kDataLabels).get(0), 7);
  EXPECT_EQ(b.at(kDataLabels).get(2), 0);
  float lo = 1, hi = 0;
  double sum = 0;
  for (float v : x.span<float>()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_EQ(lo, 0.0f);  // background
  EXPECT_EQ(hi, 1.0f);  // saturated strokes (255 / 255)
  // MNIST's mean intensity is about 0.13; a digit covers roughly a fifth of the image.
  EXPECT_GT(sum / x.numel(), 0.05);
  EXPECT_LT(sum / x.numel(), 0.25);
}

TEST(Mnist, NormalizeOptionAppliesMeanAndStd) {
  REQUIRE_MNIST();
  const auto plain = open_mnist(kMnistDir);
  const auto normalized = open_mnist(kMnistDir, {{"normalize", "0.1307,0.3081"}});
  const int64_t idx[] = {42};
  const Tensor a = plain->fetch(idx).at(kDataInput), b = normalized->fetch(idx).at(kDataInput);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(b.get(i), (a.get(i) - 0.1307) / 0.3081, 1e-5) << i;
  // Over the whole split the normalized pixels have mean ~0 and std ~1 (the constants come from
  // the train split, so the test split is off by a little).
  double sum = 0, sq = 0;
  int64_t n = 0;
  std::vector<int64_t> all(1000);
  for (int64_t i = 0; i < 1000; ++i) all[static_cast<size_t>(i)] = i * 10;
  const Batch batch = normalized->fetch(all);  // kept alive: the loop reads its tensor
  for (float v : batch.at(kDataInput).span<float>()) {
    sum += v;
    sq += double{v} * v;
    ++n;
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sd, 1.0, 0.05);
  EXPECT_THROW(open_mnist(kMnistDir, {{"normalize", "0.5"}}), InvalidArgument);
  EXPECT_THROW(open_mnist(kMnistDir, {{"normalize", "0.5,0"}}), InvalidArgument);
}

TEST(Mnist, RawIdxFilesReadLikeGzipped) {
  REQUIRE_MNIST();
  TempDir dir;
  write_raw_copy(dir.path.string());
  const auto gz = open_mnist(kMnistDir), raw = open_mnist(dir.path.string());
  const int64_t idx[] = {1, 5000, 9998};
  EXPECT_TRUE(allclose(gz->fetch(idx).at(kDataInput), raw->fetch(idx).at(kDataInput), 0, 0));
}

TEST(Mnist, RefusesBadArgumentsAndMissingFiles) {
  REQUIRE_MNIST();
  const auto ds = open_mnist(kMnistDir);
  const int64_t bad[] = {10000};
  EXPECT_THROW(ds->fetch(bad), InvalidArgument);
  EXPECT_THROW(ds->label(-1), InvalidArgument);
  expect_error<InvalidArgument>([] { open_mnist(kMnistDir, {{"colour", "1"}}); }, {"colour", "normalize"});
  TempDir empty;
  expect_error<IoError>([&] { open_mnist(empty.path.string()); }, {"t10k-images-idx3-ubyte", "d5 data download mnist"});
  DatasetSpec spec{"mnist", kMnistDir, "validation", 0, {}};
  EXPECT_THROW(open_dataset(spec), InvalidArgument);
}

TEST(Mnist, TruncatedGzipIsAFormatErrorNamingFileAndOffset) {
  REQUIRE_MNIST();
  TempDir dir;
  fs::copy_file(kMnistDir + "/t10k-labels-idx1-ubyte.gz", dir.file("t10k-labels-idx1-ubyte.gz"));
  auto bytes = read_bytes(kMnistDir + "/t10k-images-idx3-ubyte.gz");
  bytes.resize(bytes.size() / 2);
  write_bytes(dir.file("t10k-images-idx3-ubyte.gz"), bytes);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); },
                            {dir.file("t10k-images-idx3-ubyte.gz"), "truncated", std::to_string(bytes.size())});
}

TEST(Mnist, CorruptGzipIsAFormatError) {
  REQUIRE_MNIST();
  TempDir dir;
  fs::copy_file(kMnistDir + "/t10k-labels-idx1-ubyte.gz", dir.file("t10k-labels-idx1-ubyte.gz"));
  auto bytes = read_bytes(kMnistDir + "/t10k-images-idx3-ubyte.gz");
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x5a;
  write_bytes(dir.file("t10k-images-idx3-ubyte.gz"), bytes);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); }, {dir.file("t10k-images-idx3-ubyte.gz"), "byte offset"});
}

TEST(Mnist, DamagedIdxContentsAreFormatErrorsWithOffsets) {
  REQUIRE_MNIST();
  TempDir dir;
  write_raw_copy(dir.path.string());
  const std::string images = dir.file("t10k-images-idx3-ubyte"), labels = dir.file("t10k-labels-idx1-ubyte");
  const auto good_images = read_bytes(images), good_labels = read_bytes(labels);

  auto short_images = good_images;
  short_images.resize(short_images.size() - 100);
  write_bytes(images, short_images);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); },
                            {images, "truncated", "byte offset " + std::to_string(short_images.size())});

  auto trailing = good_images;
  trailing.push_back(0);
  write_bytes(images, trailing);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); }, {images, "trailing", std::to_string(good_images.size())});

  write_bytes(images, good_labels);  // labels where images belong: wrong magic
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); }, {images, "0x00000801", "0x00000803", "byte offset 0"});
  write_bytes(images, good_images);

  auto bad_label = good_labels;
  bad_label[8 + 5] = 12;
  write_bytes(labels, bad_label);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); }, {labels, "label 12", "byte offset 13"});

  auto fewer = good_labels;  // 9999 labels, consistently described
  fewer[7] = static_cast<uint8_t>(fewer[7] - 1);
  fewer.pop_back();
  write_bytes(labels, fewer);
  expect_error<FormatError>([&] { open_mnist(dir.path.string()); }, {"10000 images", "9999 labels"});
}

TEST(Mnist, FashionMnistReadsTheSameLayout) {
  REQUIRE_MNIST();
  register_builtin_datasets();
  DatasetSpec spec{"fashion-mnist", kMnistDir, "test", 0, {}};
  const auto ds = open_dataset(spec);
  EXPECT_EQ(ds->name(), "fashion-mnist");
  EXPECT_EQ(ds->size(), 10000);
}

}  // namespace d5::test
