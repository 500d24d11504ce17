// Photo-like JPEG sets in both containers (deep500/train/synthetic_images.h) and the page-cache
// helpers a cold read relies on (deep500/train/page_cache.h).
#include <gtest/gtest.h>

#include <sys/vfs.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "deep500/core/error.h"
#include "deep500/train/dataset.h"
#include "deep500/train/image_datasets.h"
#include "deep500/train/page_cache.h"
#include "deep500/train/synthetic_images.h"
#include "lv2/images/tar_archive.h"
#include "lv2/images/tfrecord.h"
#include "image_test_util.h"

namespace d5 {
namespace {

using test::TempDir;

SyntheticImagesOptions small_set() {
  SyntheticImagesOptions o;
  o.images = 12;
  o.side = 40;
  o.classes = 3;
  o.seed = 7;
  return o;
}

// Per sample: its label and the sum of its decoded pixels, sorted (the containers order samples
// differently: the tar by class directory, the TFRecord file as written).
std::vector<std::pair<int64_t, double>> decoded(const std::string& format, const std::string& path) {
  auto ds = open_dataset(test::dataset_spec(format, path, {{"resize", "40"}, {"crop", "40"}, {"threads", "1"}}));
  std::vector<int64_t> all(static_cast<size_t>(ds->size()));
  std::iota(all.begin(), all.end(), 0);
  const Batch b = ds->fetch(all);
  const Tensor& x = b.at(kDataInput);
  const int64_t per = x.numel() / ds->size();
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t i = 0; i < ds->size(); ++i) {
    double sum = 0;
    for (int64_t k = 0; k < per; ++k) sum += x.data_as<float>()[i * per + k];
    out.emplace_back(b.at(kDataLabels).data_as<int64_t>()[i], sum);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SyntheticImages, TarAndTfrecordHoldTheSameJpegs) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const auto tar = write_synthetic_image_tar(dir.file("train.tar"), small_set());
  const auto rec = write_synthetic_image_tfrecord(dir.file("train.tfrecord"), small_set());
  EXPECT_EQ(tar.images, 12);
  EXPECT_EQ(tar.jpeg_bytes, rec.jpeg_bytes);
  EXPECT_GT(tar.file_bytes, tar.jpeg_bytes);  // 512-byte headers and padding
  EXPECT_GT(rec.file_bytes, rec.jpeg_bytes);  // framing, CRCs and the Example around each
  const auto a = decoded("image-tar", tar.path), b = decoded("tfrecord", rec.path);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);  // same labels, same pixels, bit for bit
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_EQ(std::count_if(a.begin(), a.end(), [&](const auto& p) { return p.first == c; }), 4) << "class " << c;
  // A different seed draws different images: the comparison above can tell them apart.
  SyntheticImagesOptions other = small_set();
  other.seed = 8;
  const auto c = write_synthetic_image_tfrecord(dir.file("other.tfrecord"), other);
  EXPECT_NE(decoded("tfrecord", c.path), a);
}

template <class F>
void expect_invalid(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument naming '" << part << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(SyntheticImages, RefusesBadOptions) {
  TempDir dir;
  SyntheticImagesOptions o = small_set();
  o.images = 0;
  expect_invalid([&] { write_synthetic_image_tar(dir.file("a.tar"), o); }, "images must be");
  o = small_set();
  o.quality = 101;
  expect_invalid([&] { write_synthetic_image_tfrecord(dir.file("a.tfrecord"), o); }, "quality");
  o = small_set();
  o.side = 4;
  expect_invalid([&] { write_synthetic_image_tar(dir.file("a.tar"), o); }, "side");
}

TEST(PageCache, DatasetFilesListsAFileOrADirectoryTree) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "a" / "b");
  for (const char* f : {"z.bin", "a/y.bin", "a/b/x.bin"}) std::ofstream(dir.path / f) << "data";
  EXPECT_EQ(dataset_files(dir.file("z.bin")), std::vector<std::string>{dir.file("z.bin")});
  EXPECT_EQ(dataset_files(dir.path.string()),
            (std::vector<std::string>{dir.file("a/b/x.bin"), dir.file("a/y.bin"), dir.file("z.bin")}));
  EXPECT_THROW(dataset_files(dir.file("missing")), IoError);
}

// Dropping pages works on a disk; on tmpfs the pages are the file and stay. The test knows which
// it is from statfs rather than skipping.
TEST(PageCache, DropThenReadIsSeenByResidency) {
  TempDir dir;
  const std::string f = dir.file("data.bin");
  {
    std::ofstream out(f, std::ios::binary);
    std::vector<char> block(1 << 20, 'x');
    for (int i = 0; i < 4; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
  struct statfs fs {};
  ASSERT_EQ(::statfs(f.c_str(), &fs), 0);
  const bool in_memory = fs.f_type == 0x01021994;  // TMPFS_MAGIC
  drop_from_page_cache(f);
  const PageCacheResidency after_drop = page_cache_residency({f});
  EXPECT_EQ(after_drop.pages, (4u << 20) / static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  if (in_memory) {
    EXPECT_EQ(after_drop.fraction(), 1.0);
  } else {
    EXPECT_LT(after_drop.fraction(), 0.05);
  }
  std::ifstream in(f, std::ios::binary);
  std::vector<char> all(4 << 20);
  in.read(all.data(), static_cast<std::streamsize>(all.size()));
  EXPECT_GT(page_cache_residency({f}).fraction(), 0.95);
  EXPECT_EQ(page_cache_residency({}).fraction(), 0.0);
}

}  // namespace
}  // namespace d5
